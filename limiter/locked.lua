-- locked.lua: ModeLocked's acquire once the site lock is won (Redis in
-- Action 6.3's), sent right after the lock's SET NX in one pipeline; it
-- writes only while the lock is ours.
-- KEYS: see common.lua.
-- ARGV[1] the lock token the SET asked for   ARGV[2] lease ms   ARGV[3] key TTL ms
-- ARGV[4] the age in ms the node needs before it may grant (young.lua)
-- ARGV[5] m, the number of contributors (0: no ceiling, no extra command)
-- ARGV[6] how long a contributor's rule counts (ms)
-- ARGV[7] '1' = adaptive politeness: the site's health record is read in
-- the same MGET and its effective cap and extra delay returned
-- ARGV[8..7+3m] contributor, limit, delay ms: m triples (ceiling.lua)
-- ARGV[8+3m..] entry ids, in batch order
-- If the lock is not ours (another won it, or we stalled past LockTTL and
-- another took it), it writes nothing and returns {0}. If the site has no counter and the node
-- is too young to grant (young.lua), it writes nothing to the line (the
-- contributors' rules are recorded), releases the lock and
-- returns {2, ms to wait}. Otherwise it drops expired entries, takes
-- counters with INCRBY (never lower than any taken before: a counter is never
-- set back), adds the entries, releases the lock and returns {1, entries
-- kept ahead (ZCARD owners before ours), next-request ms, the wait hints for
-- a ticket in front and one behind (wait_hints in common.lua), server ms,
-- the ceiling's limit and delay ms (0 0 when m is 0), the health's effective
-- cap (0: not reduced) and extra delay ms (adaptive.lua)}. With
-- contributors, their rules are recorded first and the ceiling is what every
-- rule with a contributor applies.
local got
if ARGV[7] == '1' then
  got = redis.call('MGET', KEYS[4], KEYS[5], KEYS[7])
else
  got = redis.call('MGET', KEYS[4], KEYS[5])
end
if got[1] ~= ARGV[1] then
  return {0}
end
local now = now_ms()
local lease, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local m = tonumber(ARGV[5])
local first = 8 + 3 * m -- the first entry id
local n = #ARGV - first + 1
local climit, cdelay = 0, 0
if m > 0 then
  local contribs, lim, own = {}, nil, 0
  for i = 0, m - 1 do
    local c = {ARGV[8 + 3 * i], tonumber(ARGV[9 + 3 * i]), tonumber(ARGV[10 + 3 * i])}
    contribs[#contribs + 1] = c
    lim, own = math.min(lim or c[2], c[2]), math.max(own, c[3])
  end
  climit, cdelay, ttl = apply_ceiling(now, tonumber(ARGV[6]), contribs, true, lim, own, ttl)
end
local oldest, card, new = prune(now, lease, ttl)
local nxt = tonumber(got[2] or '0')
local c = redis.call('INCRBY', KEYS[3], n)
if c == n then
  local young = node_young(tonumber(ARGV[4]))
  if young > 0 then
    redis.call('DEL', KEYS[3], KEYS[4])
    return {2, young}
  end
end
for i = 1, n do
  redis.call('ZADD', KEYS[1], now, ARGV[first - 1 + i])
  redis.call('ZADD', KEYS[2], c - n + i, ARGV[first - 1 + i])
end
touch(ttl, lease, new)
redis.call('DEL', KEYS[4])
local hcap, hdelay = health_head(got[3])
local front, back = wait_hints(now, lease, nxt, oldest)
return {1, card, nxt, front, back, now, climit, cdelay, hcap, hdelay}
