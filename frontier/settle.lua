-- settle.lua: end one turn of an item in flight, admit the links found on it
-- that belong to this shard, and take the next item: one call per page.
-- KEYS, ARGV[1] and the numbers: see common.lua.
-- ARGV[3] item ID (its in-flight member)   ARGV[4] how:
--   'fetched', 'skipped'  done (skipped also counted apart); its site's slot
--                         is free: a site parked at its cap, or deferred as
--                         full, takes its turn again (after its delay, if any)
--   'failed'              given up (counted in failed): frees the slot but
--                         brings no deferred site forward
--   'retry'               back to the tail as ARGV[5], not before delay ms
--                         unless the site is ready already
--   'deferred'            back to the head, the site not ready for delay ms
--   'released'            back to the head, the site ready at once
-- ARGV[5] item json for 'retry'
-- ARGV[6] '1' to take the next item, followed by a site to take it from
-- if that site is ready (take's prefer); '0' not to
-- ARGV[7] the take's id (see take; '' with no take)
-- ARGV[8..] links: quadruples as in add.lua
-- Own numbers: delay ms; the site's cap as the worker applied it (0: keep
-- the known one); the site's delay ms (-1: keep the known one); the site
-- bound for the links (common.lua sitemax)
-- Returns reply's string (common.lua): settled, admitted, the scope size
-- (0: not read) and, with a take, what it took.
begin()
local delay, rcap, rdelay
delay, rcap, rdelay, sitemax = own_nums(4)

-- stay: the site the worker asks to stay on ('': none) when it takes an
-- item now; nil when it takes none.
local stay = string.sub(ARGV[6], 1, 1) == '1' and string.sub(ARGV[6], 2) or nil

local function settle(member, how)
  local done = how == 'fetched' or how == 'skipped' or how == 'failed' -- the item's turns end
  local site, item = split(member, not done)
  if not site or redis.call('ZREM', K[2], member) == 0 then
    return 0
  end
  local cap, rd, known = rule(site)
  if rcap > 0 or rdelay >= 0 then
    local c, d = cap, rd
    if rcap > 0 then cap = rcap end
    if rdelay >= 0 then rd = rdelay end
    -- Written when it differs from the stored rule's numbers (the text is
    -- made only then: each number in it is a "%.14g" format).
    if not known or cap ~= c or rd ~= d then
      local r = cap .. ' ' .. rd
      redis.call('HSET', K[5], site, r)
      rules[site] = r
    end
  end
  local f
  local staying = site == stay and (how == 'fetched' or how == 'skipped')
  if staying then
    -- The worker may stay: its next item may be handed on (owed).
    held = tonumber(redis.call('HGET', K[4], site) or '0')
    if held >= 1 then
      f, owed = held - 1, site
    end
  end
  f = f or fly(site, '-1')
  if done then
    count(how == 'failed' and 'failed' or 'done', 1)
    if how == 'skipped' then count('skipped', 1) end
  end
  if staying and f < cap and rd == 0 then
    -- Its slot free and no delay: take hands the site's next item on to
    -- this worker (handon), if it has one, without its place in the ready
    -- set being read or moved (take sets it after, as for any site it
    -- takes from; a site with nothing queued is not in the set, or is
    -- parked: see take).
    handon = site
    return 1
  end
  settle_owed() -- no hand-on: the settled item leaves its count now
  local s = tonumber(redis.call('ZSCORE', K[1], site)) -- nil: nothing queued
  local q = qkey(site)
  if done and s and s >= PARKED and redis.call('LLEN', q) == 0 then
    -- Parked by a take that did not ask whether the queue ran out (take):
    -- nothing queued, so out of the ready set, as take would have left it.
    redis.call('ZREM', K[1], site)
    s = nil
  end

  if done then
    if not s then
      if rd > 0 then -- its next URL, when one comes, waits the delay
        redis.call('HSET', K[6], site, now() + rd)
      end
      return 1
    end
    local at
    if f >= cap then
      at = parked() -- a cap lowered below the items in flight: out until enough settle
    elseif how == 'failed' then
      if s >= PARKED then
        at = math.max(back_of_line(), now() + rd)
      elseif rd > 0 and s < now() + rd then
        at = now() + rd
      end
    elseif rd > 0 then
      at = now() + rd -- the next start, a delay after this one settled
    elseif s > now() + SOON then
      -- The fetch has given its site's slot back: a site parked or deferred
      -- as full takes its turn again now. Only ever earlier, to the back of
      -- the line, so round robin among ready sites stands.
      at = math.min(s, back_of_line())
    end
    if at and at ~= s then
      redis.call('ZADD', K[1], at, site)
    end
    return 1
  end

  local n
  if how == 'retry' then
    n = redis.call('RPUSH', q, ARGV[5])
  else
    n = redis.call('LPUSH', q, item)
  end
  pushed(q, n)
  local at = now() + delay
  if f >= cap then
    at = parked()
  elseif how == 'retry' then
    if s and s < PARKED then
      at = s -- the site's other URLs keep their turn
    end
    at = math.max(at, now() + rd)
  end
  redis.call('ZADD', K[1], at, site)
  return 1
end

-- A call sent again (after an error without an answer) gets the answer it
-- got (see answered), by its take's id, or without a take by the settled
-- member's take id (its first line) and how.
local id = stay and ARGV[7] or (string.match(ARGV[3], '^[^\n]*') .. ' ' .. ARGV[4])
local again = replayed(id)
if again then
  return again
end
local settled = settle(ARGV[3], ARGV[4])
local added = admit(8)
if stay then
  local took, a, b, c = take(ARGV[7], stay)
  settle_owed() -- take pays it on every path that hands nothing on; a guard
  keep()
  -- The scope size (next.lua's) only on a take that tidies, one in 8 of a
  -- process's on the shard: it only grows, and seldom; 0 is "not read".
  local size = string.sub(ARGV[7], -1) == '0' and scope() or 0
  return remember(id, reply(settled, added, size, took, a, b, c))
end
keep()
return remember(id, reply(settled, added, 0))
