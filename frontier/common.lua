-- common.lua: the shard state and its rules, prepended to add.lua, next.lua,
-- settle.lua and hold.lua (not run on its own). Every script of a shard
-- works on the same keys, all in the shard's hash tag; it is passed the
-- first, or all of them on a Cluster, and makes the others' names (begin):
-- K[1] ready    ZSET site -> server ms from which it may be tried; only sites
--                  with URLs queued; PARKED for a site at its cap (whose
--                  queue may have run out: take does not ask)
-- K[2] inflight ZSET "<id>\n<site>\n<item json>" -> server ms when it is
--                  handed out again: the member is the item's whole state,
--                  so settling one is a ZREM and a worker's ID is the member
-- K[3] counts   HASH admitted, over (in the overflow: see admit), dropped
--                  (past the overflow), full (past a site's bound), done,
--                  skipped, failed, scope, ids (0: only keeps the hash in
--                  being); queued is admitted - done - failed - in flight
-- K[4] fly      HASH site -> items of the site in flight
-- K[5] rules    HASH site -> "<cap> <delay ms>" as a settlement last reported
-- K[6] after    HASH site -> server ms before which a site with nothing
--                  queued may not start (its rule's delay after a settlement)
-- Each of them but counts holds a sentinel ('' at +inf, or field ''), so that
-- it is never deleted and keeps the TTL it was created with (keep).
-- ARGV[1] key base: queues are base..'q:'..site, seen buckets base..'seen:'..n
-- ARGV[2] numbers, packed (luanums): key TTL ms, visibility ms, default
-- cap, page limit (0: none), refresh (keep: every key's TTL is given again
-- unless they were given it less than this many ms ago; 0: not), park ms
-- (how long a site at its cap stays out at most); then the script's own
-- numbers, if any (own_nums)
-- ARGV[3..] the script's own
--
-- Constant arguments to redis.call on the per-page paths are written as
-- strings ('0'): Redis 7.0 formats a Lua number argument with "%.17g",
-- about 0.4 µs each here.
-- A site at its cap is out of the ready set until one of its items settles,
-- or, at most, for park ms (the numbers' sixth): an item whose worker died counts against its
-- site's cap until its visibility timeout, far longer than the permit lease
-- after which the semaphore (the safety) would let the site be fetched
-- again. Its score is PARKED plus the server ms when it comes back.
--
-- The top level here only defines: run as a library of Redis Functions
-- (internal/luafn) it runs once, where no global can be read, and its
-- locals live from one call to the next. So a call's own state (the
-- arguments below, what it has read and owes) is set by begin, every
-- script's first statement.
-- K is the call's keys (begin: KEYS as given on a Cluster, else KEYS[1]
-- and the names made from it): the scripts read K, never KEYS, which a
-- script run by EVAL may not replace (Redis 7 makes its globals read-only).
local K
local PARKED = 1e15
local park
local SOON = 0.5 -- ready: a score at most now + SOON (round-robin places are
-- fractions of a millisecond past now, real waits whole milliseconds)
local base, ttl, vis -- ARGV[1], then the numbers
local defcap, limit, refresh, sitemax
local delta -- counts increments, written once at the end (keep)

-- now is the server ms (servertime.lua's now_ms), read once a call;
-- now_text the same as text (ms_text: cheaper to pass to a command).
local clock, clock_t, clock_text
local function now()
  if not clock then
    clock, clock_t = now_ms()
  end
  return clock
end
local function now_text()
  if not clock_text then
    now()
    clock_text = ms_text(clock_t)
  end
  return clock_text
end

-- SOON_TEXT appended to now_text is now + SOON: it must change with SOON.
local SOON_TEXT = '.5'

-- INT is the text of small counts, for the same reason as now_text.
local INT = {'1', '2', '3', '4', '5', '6', '7', '8', '9', '10', '11', '12', '13', '14', '15', '16'}

-- parked is the score of a site at its cap from now (see PARKED).
local function parked()
  return PARKED + now() + park
end

local function count(field, n)
  delta[field] = (delta[field] or 0) + n
end

-- ttl_text is ttl as text for PEXPIRE (a number argument costs Redis a
-- "%.17g"), made once for each ttl (a library's locals outlive a call).
local ttl_of, ttl_txt
local function ttl_text()
  if ttl ~= ttl_of then
    ttl_of, ttl_txt = ttl, int_text(ttl)
  end
  return ttl_txt
end

local function qkey(site)
  return base .. 'q:' .. site
end

-- A new queue gets the TTL at once; the shard's other keys have theirs
-- from their creation (keep).
local function pushed(q, n)
  if n == 1 then
    redis.call('PEXPIRE', q, ttl_text())
  end
end

-- The score that puts a site behind every site that is ready or was just
-- served, even within the same millisecond (ties would go by name): the
-- back of the round-robin line. When no site has been served this
-- millisecond, that is now. A call reads the line once: its own later
-- places follow the last it gave.
local back
local function back_of_line()
  if back then
    back = back + 0.001
    return back
  end
  local last = redis.call('ZREVRANGEBYSCORE', K[1], now_text() .. SOON_TEXT, '-inf', 'WITHSCORES', 'LIMIT', '0', '1')
  back = now()
  if last[2] and tonumber(last[2]) >= now() then
    back = tonumber(last[2]) + 0.001
  end
  return back
end

-- parsed holds rule texts ("<cap> <delay ms>") as {cap, delay}, from one
-- call to the next (a library's locals outlive a call), so that the few
-- texts a crawl has are parsed once, not on every page (a find, two subs
-- and two strtods); at most PARSED_MAX of them, then it starts afresh.
local PARSED_MAX = 256
local parsed, nparsed = {}, 0

-- rule is the site's cap and delay (ms): what a settlement last reported,
-- or the default cap and no delay; and the stored text (nil: none). A
-- call reads each site's once.
local rules
local function rule(site)
  local r = rules[site]
  if r == nil then
    r = redis.call('HGET', K[5], site) or false
    rules[site] = r
  end
  if not r then
    return defcap, 0, nil
  end
  local p = parsed[r]
  if not p then
    local sp = string.find(r, ' ', 1, true)
    p = {tonumber(string.sub(r, 1, sp - 1)), tonumber(string.sub(r, sp + 1))}
    if nparsed >= PARSED_MAX then
      parsed, nparsed = {}, 0
    end
    parsed[r], nparsed = p, nparsed + 1
  end
  return p[1], p[2], r
end

-- fly adds n ('1' or '-1': a string, which Redis takes without formatting a
-- number) to the site's items in flight and returns the new number.
local function fly(site, n)
  local f = redis.call('HINCRBY', K[4], site, n)
  if f < 0 then
    redis.call('HSET', K[4], site, 0)
    return 0
  end
  return f
end

-- join puts a site whose queue was empty into the ready set, from at: parked
-- if it is at its cap, and not before the end of its delay.
local function join(site, at)
  local cap = rule(site)
  if tonumber(redis.call('HGET', K[4], site) or '0') >= cap then
    at = parked()
  else
    local nb = redis.call('HGET', K[6], site)
    if nb then
      redis.call('HDEL', K[6], site)
      at = math.max(at, tonumber(nb))
    end
  end
  redis.call('ZADD', K[1], at, site)
end

-- OVERFLOW bounds the shard's overflow LIST (base..'overflow'): new URLs
-- past the page limit, "<site>\n<item json>", kept (seen) for a later
-- process with a higher limit to admit (add.lua's refill). Past it, a new
-- URL is dropped and forgotten (not seen): a page fetched later that links
-- to it admits it again.
local OVERFLOW = 10000

-- sitemax is the most URLs admit lets a site's queue take (0: no bound;
-- add.lua and settle.lua set it from their own numbers: Settle's links are
-- bounded, Seed's and Add's not). full is how many links admit dropped in
-- this call because their site's queue held sitemax URLs (the reply's
-- eighth number: the process then does not remember the call's links as
-- seen, see seencache.go).
local full

-- admit takes quadruples from ARGV[i0]: fingerprint, seen bucket, site,
-- item json; each new fingerprint is queued (within the page limit; past
-- it, kept in the overflow, counted in over, or dropped, counted in
-- dropped). A site's queue takes at most sitemax URLs: a new URL past that
-- is dropped and forgotten (not seen), like one past the overflow, and so
-- is every later link of the same site in the call, without a command (a
-- spider trap's page full of new links costs four commands, not two a
-- link); they are counted in full. It returns how many were admitted.
local function admit(i0)
  local admitted, added, over, dropped, trimmed = 0, 0, 0, 0, 0
  local room -- the overflow's free places, read at the first URL past the limit
  local at_bound -- sites found with sitemax URLs queued
  if limit > 0 then
    admitted = tonumber(redis.call('HGET', K[3], 'admitted') or '0')
  end
  for i = i0, #ARGV, 4 do
    local site = ARGV[i + 2]
    if at_bound and at_bound[site] then
      trimmed = trimmed + 1
    elseif redis.call('SADD', base .. 'seen:' .. ARGV[i + 1], ARGV[i]) == 1 then
      if limit == 0 or admitted + added < limit then
        local q = qkey(site)
        local n = redis.call('RPUSH', q, ARGV[i + 3])
        if sitemax > 0 and n > sitemax then
          redis.call('RPOP', q)
          redis.call('SREM', base .. 'seen:' .. ARGV[i + 1], ARGV[i])
          at_bound = at_bound or {}
          at_bound[site] = true
          trimmed = trimmed + 1
        else
          if n == 1 then
            pushed(q, n)
            join(site, now())
          end
          added = added + 1
        end
      else
        room = room or OVERFLOW - redis.call('LLEN', base .. 'overflow')
        if room > 0 then
          redis.call('RPUSH', base .. 'overflow', site .. '\n' .. ARGV[i + 3])
          room, over = room - 1, over + 1
        else
          redis.call('SREM', base .. 'seen:' .. ARGV[i + 1], ARGV[i])
          dropped = dropped + 1
        end
      end
    end
  end
  if room then -- the overflow lives as long as the URLs that feed it come
    redis.call('PEXPIRE', base .. 'overflow', ttl_text())
  end
  count('admitted', added)
  count('over', over)
  count('dropped', dropped)
  count('full', trimmed)
  full = full + trimmed
  return added
end

-- inflight is how many items of the shard are in flight (not the sentinel).
local function inflight()
  return redis.call('ZCOUNT', K[2], '-inf', PARKED)
end

-- split is an in-flight member's site and, with whole, its item json (a
-- new string as long as the URL and more: a settlement that ends the
-- item's turns does not ask for it).
local function split(m, whole)
  local a = string.find(m, '\n', 1, true)
  local b = a and string.find(m, '\n', a + 1, true)
  if not b then
    return nil
  end
  return string.sub(m, a + 1, b - 1), whole and string.sub(m, b + 1) or nil
end

-- tidy does what a dead worker leaves to others: items whose worker went
-- quiet past the visibility timeout go back to the head of their site's
-- queue (at-least-once) and free their site's slot, and sites parked past
-- their bound (see PARKED) come back. take runs it on every 8th item it
-- hands out and whenever it finds no site ready, so a shard that is busy
-- pays for it on few pages and one that waits never misses it.
local function tidy()
  for _, m in ipairs(redis.call('ZRANGEBYSCORE', K[2], '-inf', now_text(), 'LIMIT', '0', '100')) do
    redis.call('ZREM', K[2], m)
    local site, item = split(m, true)
    if site then
      local f = fly(site, '-1')
      local q = qkey(site)
      local n = redis.call('LPUSH', q, item)
      if n == 1 then
        pushed(q, n)
        join(site, now())
      else
        local s = tonumber(redis.call('ZSCORE', K[1], site))
        if f >= rule(site) then
          redis.call('ZADD', K[1], parked(), site)
        elseif not s or s > now() then
          redis.call('ZADD', K[1], now(), site)
        end
      end
    end
  end
  for _, site in ipairs(redis.call('ZRANGEBYSCORE', K[1], PARKED, PARKED + now(), 'LIMIT', '0', '10')) do
    if redis.call('LLEN', qkey(site)) == 0 then
      redis.call('ZREM', K[1], site) -- parked with its queue run out (take)
    else
      redis.call('ZADD', K[1], back_of_line(), site)
    end
  end
end

-- take hands out the next item of a ready site: 1, then 1 if a site of the
-- shard is still ready else 0, then id\nsite\nitem (the worker's ID: its
-- in-flight member); or, with none ready, 0, queued, in flight, ms until
-- something may be ready (-1: unknown). (Values, not a table: reply reads
-- them.) id is unique to the take, from
-- the process: "<process nonce>.<shard>.<the process's takes on the shard,
-- in octal>", so an id ending in '0' is every 8th take of a process on the
-- shard (the tidy-up's turn).
-- prefer (nil or '': none) is a site to take from rather than the first in
-- line, if it is ready: the worker holds a permit for it already.
-- handon is a site whose item this call settled with its slot free and
-- its next start come, for take to hand its next item to the same worker
-- (prefer): settle leaves the site's place in the ready set as it was (at
-- its cap, typically: parked), and take sets it after the hand-on, as it
-- does for any site it takes from. That saves moving the site to the back
-- of the line and reading its place back.
local handon
-- owed is a site whose settled item settle has not yet taken out of its
-- count in flight (fly), in case take hands the site's next item on (the
-- count then stays as it is: one out, one in); whatever else happens, the
-- script takes it out before it ends (settle_owed). held is the site's
-- count as settle read it, the settled item still in.
local owed, held

-- settle_owed takes the settled item out of its site's count in flight,
-- if that is still owed.
local function settle_owed()
  if owed then
    fly(owed, '-1')
    owed = nil
  end
end

local function take(id, prefer)
  local tidied = string.sub(id, -1) == '0'
  if tidied then
    settle_owed() -- tidy may change the site's count: hand on from the count in Redis
    tidy()
  end
  for _ = 1, 20 do
    -- The first two ready sites: the second tells whether another is ready.
    local pick = redis.call('ZRANGEBYSCORE', K[1], '-inf', now_text() .. SOON_TEXT, 'LIMIT', '0', '2')
    local handing = prefer and prefer == handon
    if #pick == 0 and not tidied and not handing then
      tidied = true
      tidy()
      pick = redis.call('ZRANGEBYSCORE', K[1], '-inf', now_text() .. SOON_TEXT, 'LIMIT', '0', '2')
    end
    local site, more
    if handing then
      -- more: another site of the shard is ready.
      site, more = prefer, ((pick[1] and pick[1] ~= prefer) or pick[2]) and 1 or 0
      prefer, handon = nil, nil -- looked at once: a queue lost under it is not looked at again
    else
      if #pick == 0 then
        break
      end
      site = pick[1]
      -- more: a site of the shard is still ready (this one, if below its
      -- cap), so an idle worker could take an item now.
      more = #pick - 1
    end
    if prefer and prefer ~= '' and prefer ~= site then
      if prefer == pick[2] or (tonumber(redis.call('ZSCORE', K[1], prefer)) or math.huge) <= now() + SOON then
        site, more = prefer, 1 -- pick[1] is ready too
      end
      prefer = nil -- looked at once: a queue lost under it is not looked at again
    end
    local q = qkey(site)
    local item = redis.call('LPOP', q)
    if item then
      local f
      if site == owed then
        f, owed = held, nil -- one out, one in: the count stays as it is
      else
        f = fly(site, '1')
      end
      local cap, rd = rule(site)
      -- A site at its cap without a delay is parked without asking whether
      -- its queue ran out (an LLEN nearly every page of a busy site): one
      -- that comes back with nothing queued leaves the ready set when next
      -- taken from (a queue lost, below). A site with a delay is asked, so
      -- that its next URL waits the delay (settle's after).
      if (f < cap or rd > 0) and redis.call('LLEN', q) == 0 then
        redis.call('ZREM', K[1], site)
      elseif f >= cap then
        redis.call('ZADD', K[1], int_text(parked()), site) -- at its cap: back when one settles
      else
        redis.call('ZADD', K[1], back_of_line(), site) -- round robin
        more = 1
      end
      local member = id .. '\n' .. site .. '\n' .. item
      redis.call('ZADD', K[2], int_text(now() + vis), member)
      return 1, more, member
    end
    if site == owed then
      settle_owed() -- nothing to hand on: before a tidy-up changes the count
    end
    redis.call('ZREM', K[1], site) -- a queue lost (expired) under a ready site
  end

  local c = redis.call('HMGET', K[3], 'admitted', 'done', 'failed')
  local flying = inflight()
  local queued = tonumber(c[1] or '0') + (delta['admitted'] or 0) - tonumber(c[2] or '0') - (delta['done'] or 0)
    - tonumber(c[3] or '0') - (delta['failed'] or 0) - flying
  local wait = -1
  -- (A sentinel's "inf" is no number to some Lua; either way, no time.)
  local first = tonumber(redis.call('ZRANGE', K[1], '0', '0', 'WITHSCORES')[2] or '')
  if first and first >= PARKED and first < math.huge then
    first = first - PARKED -- the first site is parked: when it comes back
  end
  if first and first < PARKED then
    wait = math.max(0, math.ceil(first - now() - SOON))
  end
  local soonest = tonumber(redis.call('ZRANGE', K[2], '0', '0', 'WITHSCORES')[2] or '')
  if soonest and soonest < PARKED then
    local w = math.max(0, soonest - now())
    if wait < 0 or w < wait then
      wait = w
    end
  end
  return 0, queued, flying, wait
end

-- keep writes the counts, and with refresh (each process asks once a minute
-- per shard) gives every key of the shard the TTL again, creating the
-- sentinels that keep the keys from ever being deleted, and so from ever
-- being created again without a TTL; unless the shard's keys were given at
-- least this process's TTL less refresh ms (half its interval) ago, by
-- any process: the ready set's TTL tells, as its sentinel keeps it and
-- every refresh sets it. So a fleet pays about once an interval for what
-- costs 512 commands and more (the seen buckets, every queue), and a
-- process with a longer TTL than the last refresher's gets its own. New
-- queues get theirs when created (pushed); nothing else is created
-- between refreshes.
local function keep()
  for field, n in pairs(delta) do
    if n ~= 0 then
      redis.call('HINCRBY', K[3], field, INT[n] or n)
    end
  end
  if refresh == 0 or redis.call('PTTL', K[1]) >= ttl - refresh then
    return
  end
  -- Text arguments: a number would cost a "%.17g" each, and a refresh
  -- makes some 600 calls and more (every queue).
  local ttl_t = ttl_text()
  redis.call('HINCRBY', K[3], 'ids', '0')
  redis.call('ZADD', K[1], '+inf', '')
  redis.call('ZADD', K[2], '+inf', '')
  for i = 4, 6 do
    redis.call('HSETNX', K[i], '', '')
  end
  for i = 1, #K do
    redis.call('PEXPIRE', K[i], ttl_t)
  end
  -- The overflow (admit), if any: a push gives it the TTL, but once full
  -- it takes no more, and it must outlive the crawl's run like the rest.
  redis.call('PEXPIRE', base .. 'overflow', ttl_t)
  for _, site in ipairs(redis.call('ZRANGE', K[1], '0', '-1')) do
    if site ~= '' then
      redis.call('PEXPIRE', qkey(site), ttl_t)
    end
  end
  for b = 0, 255 do
    local k = base .. 'seen:' .. b
    redis.call('SADD', k, '0') -- the sentinel: fingerprint 0 counts as seen
    redis.call('PEXPIRE', k, ttl_t)
  end
end

-- scope is the crawl's scope size as Seed noted it.
local function scope()
  return tonumber(redis.call('HGET', K[3], 'scope') or '0')
end

-- instance names this load of the library on its server: the server time
-- of its first call, kept for as long as the library stays loaded (as a
-- library: LIBRARY; loading other libraries leaves it). Another means the
-- library was loaded anew there, because Redis restarted (with its data or
-- without), a replica took over or resynced: any of these may have lost
-- the last writes, the seen sets' among them (see the Go side's
-- seenCache). '' as a script (there a lost script, NOSCRIPT, tells the same).
local instance
local function instance_id()
  if not LIBRARY then
    return ''
  end
  if not instance then
    local t = redis.call('TIME')
    instance = t[1] .. '.' .. t[2]
  end
  return instance
end

-- own_nums is the script's own n numbers, packed after the common ones.
local function own_nums(n)
  return nums(ARGV[2], n, 49) -- past the 6 common numbers' 48 bytes
end

-- KEY_NAMES are the shard's keys after the ready set, as shard.go names
-- them. Where keys never move (a single node, a Ring: luafn.Slotless) a
-- call passes only the ready set (KEYS[1]) and the base (ARGV[1]); begin
-- makes the others here, once a base (shard_keys: a library's locals
-- outlive a call), where each key passed costs Redis a string for the
-- call, some 1,400 instructions (measured under callgrind). Like the
-- queues and seen buckets, they are in the shard's hash tag. On a Cluster
-- a call passes all six, so that a slot in migration refuses the call
-- (TRYAGAIN) rather than let it run half on either node.
local KEY_NAMES = {'inflight', 'counts', 'fly', 'rules', 'after'}
local keys_of, nkeys_of = {}, 0 -- at most 256 bases (shards), then afresh

local function shard_keys(b, ks)
  if ks[2] then
    return ks -- all of them given (a Cluster)
  end
  local k = keys_of[b]
  if not k then
    k = {ks[1]}
    for i = 1, #KEY_NAMES do
      k[i + 1] = b .. KEY_NAMES[i]
    end
    if nkeys_of >= 256 then
      keys_of, nkeys_of = {}, 0
    end
    keys_of[b], nkeys_of = k, nkeys_of + 1
  end
  return k
end

-- begin sets the call's state from its arguments, before anything else,
-- K among it (shard_keys).
local function begin()
  base = ARGV[1]
  K = shard_keys(base, KEYS)
  ttl, vis, defcap, limit, refresh, park = nums(ARGV[2], 6)
  delta, rules, full, sitemax = {}, {}, 0, 0
  clock, clock_t, clock_text, back, handon, owed, held = nil, nil, nil, nil, nil, nil, nil
end

-- answered holds the replies of recent calls that took or settled an item,
-- by the call's id (its take's id, or the settled member's take id and
-- how), from one call to the next (a library's locals outlive a call).
-- go-redis sends a command again after a read timeout or a broken
-- connection, and the frontier sends a call again once after an error
-- without an answer (Frontier.again), when Redis may have run it already:
-- each such call took another item that nobody held until the visibility
-- timeout, and a settlement sent again found its item gone and answered
-- "no longer held". A call whose id is here answers what it answered and
-- does nothing again. A call that took nothing is not kept (it changed
-- nothing). Two generations, the newer started afresh once it holds
-- ANSWERED replies or ANSWERED_BYTES of them (a reply carries the item's
-- text, up to --max-url-length twice): at most some 300 KB of the server's
-- Lua memory, one memo for every crawl on the server. A repeat is
-- answered if it comes within one generation's worth of calls: 512, or
-- fewer when the replies are long (128 KB of them: some 300 at 400 bytes).
-- That covers what makes a call go unanswered: Redis stalled (a fork, a
-- slow disk, a long command), and when it woke it ran the first send and,
-- soon after, its repeat, with between them only what the fleet's
-- workers, each blocked on its own call, had sent meanwhile (and their
-- repeats): a few per worker, so a fleet of a hundred or so. Past that a
-- repeat runs again, as every call did before the memo: a take leaves an
-- item nobody holds until the visibility timeout, and a settlement answers
-- "no longer held", which the process takes as settled (settle.go). The
-- memo's replies stay alive, and Lua's collector walks them: replayed
-- under callgrind, a 5,924-page crawl cost 419,776 instructions a page
-- without the memo, 422,792 with 256 entries, 423,455 with 512 and
-- 437,195 with 4,096. Run as a script (no library: EVALSHA, the demo's
-- miniredis) nothing is kept.
local ANSWERED, ANSWERED_BYTES = 512, 128 * 1024
local answered, answered_old, nanswered, nbytes = {}, {}, 0, 0

-- replayed is the reply already given to the call with this id, if any,
-- marked as a repeat: its first number (settled, 1 or 0) plus 2, so that
-- the process knows a "no longer held" in it is what the first send found.
local function replayed(id)
  if not LIBRARY then
    return nil
  end
  local r = answered[id] or answered_old[id]
  if r then
    return packed(nums(r, 1) + 2) .. string.sub(r, 9)
  end
end

-- remember keeps r as the reply to the call with this id, and returns it.
local function remember(id, r)
  if LIBRARY then
    if nanswered >= ANSWERED or nbytes >= ANSWERED_BYTES then
      answered_old, answered, nanswered, nbytes = answered, {}, 0, 0
    end
    answered[id], nanswered, nbytes = r, nanswered + 1, nbytes + #r + #id + 40
  end
  return r
end

-- reply is a script's answer as one string (a table reply costs Redis
-- some 5,000 instructions more, measured under callgrind; Go: answer):
-- 8 numbers packed (luanums): settled (1, or 0 when the item was no longer
-- held), admitted, the scope size (0: not read), took (1: an item, 0: none
-- ready, -1: not asked), then with took 1, more (1 if a site of the shard
-- is still ready) and two 0s, with took 0, queued, in flight and ms until
-- something may be ready (-1: unknown), with -1 three 0s, and full (see
-- admit); then the
-- instance (instance_id); then, with took 1, a newline and the item's
-- in-flight member. took and a, b, c are take's values (took nil: not
-- asked).
local function reply(settled, added, size, took, a, b, c)
  if not took then
    return packed(settled, added, size, -1, 0, 0, 0, full) .. instance_id()
  end
  if took == 1 then
    return packed(settled, added, size, 1, a, 0, 0, full) .. instance_id() .. '\n' .. b
  end
  return packed(settled, added, size, 0, a, b, c, full) .. instance_id()
end
