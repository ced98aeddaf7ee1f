-- common.lua: helpers prepended to every limiter script (not run on its own).
-- Every script works on the same keys, all hash-tagged with the site so they
-- share one Redis Cluster slot. Where keys never move (a single node, a
-- Ring) it is passed only the first, on a Cluster all of them (keys.go
-- keyArgs says why), and its first statement is K = site_keys(KEYS); the
-- scripts read K, never KEYS, which a script run by EVAL may not replace
-- (Redis 7 makes its globals read-only):
--   K[1] holders  ZSET   member = entry id, score = server ms of last acquire/heartbeat
--   K[2] owners   ZSET   member = entry id, score = counter value (fair order)
--   K[3] counter  STRING INCR counter
--   K[4] lock     STRING ModeLocked's site lock (SET NX PX token)
--   K[5] next     STRING server ms before which no permit may be granted (crawl delay)
--   K[6] health   STRING the site's health (adaptive.lua), used only with adaptive politeness
--   K[7] rules    HASH   contributors' rules (ceiling.lua), used only with one
-- Each key passed would be a string Redis makes for the call, some 1,400
-- instructions (measured under callgrind with Redis 7.0); a name made here
-- is kept for the site's next call (site_keys).
-- Entries ranked below the limit in owners hold permits; the rest wait in line.
-- Constant arguments to redis.call are written as strings ('0'): Redis 7.0
-- formats a Lua number argument with "%.17g", about 0.4 µs each here.
-- Ranks only ever fall (new entries always get a higher counter), so an entry
-- that has once seen rank < limit keeps it until it leaves.

-- K is the call's keys (site_keys).
local K

-- SITE_KEYS are the names after holders, in K order, as keys.go makes
-- them: the site's base (holders' name without "holders") and each.
local SITE_KEYS = {'owners', 'counter', 'lock', 'next', 'health', 'rules'}
-- keys_of keeps the names of up to 1,024 sites' keys, by holders' name,
-- from one call to the next (a library's locals outlive a call), then
-- starts afresh.
local keys_of, nkeys_of = {}, 0

-- site_keys is the K list above from the call's KEYS ks: ks itself when
-- it has them all, else made from holders' name, ks[1].
local function site_keys(ks)
  if ks[2] then
    return ks
  end
  local h = ks[1]
  local k = keys_of[h]
  if not k then
    local b = string.sub(h, 1, -8) -- past "holders"
    k = {h}
    for i = 1, #SITE_KEYS do
      k[i + 1] = b .. SITE_KEYS[i]
    end
    if nkeys_of >= 1024 then
      keys_of, nkeys_of = {}, 0
    end
    keys_of[h], nkeys_of = k, nkeys_of + 1
  end
  return k
end

-- Every key of the line (holders, owners, counter) gets the same TTL, set
-- together, so that they expire together: no entry outlives its counter
-- (a counter that restarted would rank a newcomer ahead of it) and owners
-- never keeps entries holders has lost. A key needs it set again when it is
-- new (a ZADD to an empty set or an INCR of a missing counter creates it
-- without one), when ZINTERSTORE rewrote owners (which drops its TTL), and
-- when more than a lease has passed since it was last set: so a key always
-- outlives, by a lease and more, every entry written or heartbeated, which
-- lives one lease without a heartbeat. The TTL is read from the counter;
-- callers pass force when they know a key is new.
local function touch(ttl, lease, force)
  if force or redis.call('PTTL', K[3]) < ttl - lease then
    for i = 1, 3 do
      redis.call('PEXPIRE', K[i], ttl)
    end
  end
end

-- Drop entries whose lease ran out, from holders and then from owners, so
-- that they do not count against the limit: only when there is one, which
-- the oldest holder tells (owners holds no entry holders lacks: entries
-- enter both at once and leave holders only here, with owners rewritten at
-- once, or with owners first). The one exception is holders expiring a
-- moment before owners (their expiry times can differ by a millisecond):
-- then holders is empty while owners is not, and that is pruned too.
-- owned is ZCARD owners when the caller has just read it, else nil.
-- Returns the score of the oldest live holder (nil if none), the entries in
-- owners, and whether a ZADD will create holders or owners (so the caller
-- must touch).
local function prune(now, lease, ttl, owned)
  local cut = now - lease
  local oldest = tonumber(redis.call('ZRANGE', K[1], '0', '0', 'WITHSCORES')[2])
  owned = owned or redis.call('ZCARD', K[2])
  if (oldest and oldest <= cut) or (not oldest and owned > 0) then
    redis.call('ZREMRANGEBYSCORE', K[1], '-inf', cut)
    owned = redis.call('ZINTERSTORE', K[2], '2', K[2], K[1], 'WEIGHTS', '1', '0')
    oldest = tonumber(redis.call('ZRANGE', K[1], '0', '0', 'WITHSCORES')[2])
    touch(ttl, lease, true)
  end
  return oldest, owned, not oldest or owned == 0
end

local function next_at()
  return tonumber(redis.call('GET', K[5]) or '0')
end

-- How long (ms) a waiter should sleep before something can change for it
-- without a wake-up message: front for one already in front (rank below the
-- limit), the crawl delay; back for one behind, the moment the oldest entry's
-- lease can run out (oldest: its score, as prune returns it). ModeLocked
-- returns both and picks in Go, where it decides each ticket's rank.
local function wait_hints(now, lease, nxt, oldest)
  local back = lease
  if oldest then
    back = math.max(1, oldest + lease - now + 1)
  end
  return math.max(1, nxt - now), back
end

-- The wait hint for a waiter at rank (0 first), the first limit ranks holding
-- permits.
local function wait_hint(now, lease, rank, limit, nxt, oldest)
  local front, back = wait_hints(now, lease, nxt, oldest)
  if rank < limit then
    return front
  end
  return back
end

-- tell publishes head and the ids to each id's process (release.lua): on
-- the channel base .. its tag (an id is "<tag>.<n>", hub.go), once a
-- process. The releaser's own process is told too: its reply also carries
-- the ids, which wakes its waiters sooner, but a reply can be lost (a
-- timeout after the script ran) or left unread (ReleaseOn's after, KeepOn's
-- released), and then only this message wakes them before their poll. An
-- id without a tag (no dot: the UUIDs of an older version) is a waiter of
-- an older version, which listens on the site's channel (the keys' base
-- and "wake") for the same message.
-- The tag is found with a plain find, not a pattern: string.match's
-- '^(%x+)%.' cost Redis some 7,000 instructions an id (callgrind), a tenth
-- of a contended hand-off's work. A channel's name is kept from one call
-- to the next for up to 1,024 tags (one per process), then made afresh.
local chan_base, chan_of, nchan_of = nil, {}, 0
local function tell(ids, head, base)
  if base ~= chan_base or nchan_of >= 1024 then
    chan_base, chan_of, nchan_of = base, {}, 0
  end
  local by, chans = {}, {}
  for _, v in ipairs(ids) do
    local dot = string.find(v, '.', 1, true)
    local ch
    if dot and dot > 1 then
      local tag = string.sub(v, 1, dot - 1)
      ch = chan_of[tag]
      if not ch then
        ch = base .. tag
        chan_of[tag], nchan_of = ch, nchan_of + 1
      end
    else
      ch = string.sub(K[1], 1, -8) .. 'wake'
    end
    if not by[ch] then
      by[ch] = {}
      chans[#chans + 1] = ch
    end
    table.insert(by[ch], v)
  end
  for _, ch in ipairs(chans) do
    -- pcall: an ACL that denies the user the channel (Redis 7's default
    -- for a new user: no channels) fails the PUBLISH, not the release,
    -- whose entry is gone already; the waiters then find their turn by
    -- their poll (Limiter.CheckWakeups says so).
    redis.pcall('PUBLISH', ch, head .. ' ' .. table.concat(by[ch], ' '))
  end
end
