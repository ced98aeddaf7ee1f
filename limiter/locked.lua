-- locked.lua: ModeLocked's acquire once the site lock is won (Redis in
-- Action 6.3's), sent right after the lock's SET NX in one pipeline; it
-- writes only while the lock is ours.
-- KEYS[1] and K: see common.lua.
-- ARGV[1] the lock token the SET asked for
-- ARGV[2] the numbers, packed (luanums): lease ms, key TTL ms, the age in
-- ms the node needs before it may grant (young.lua), m, the number of
-- contributors (0: no ceiling, no extra command), how long a contributor's
-- rule counts (ms), adaptive (1 = adaptive politeness: the site's health
-- record is read in the same MGET and its effective cap and extra delay
-- returned), then each contributor's limit and delay ms (m pairs)
-- ARGV[3..2+m] the contributors (ceiling.lua)
-- ARGV[3+m..] entry ids, in batch order
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
K = site_keys(KEYS)
local lease, ttl, need, m, rulems, adaptive = nums(ARGV[2], 6)
local got
if adaptive == 1 then
  got = redis.call('MGET', K[4], K[5], K[6])
else
  got = redis.call('MGET', K[4], K[5])
end
if got[1] ~= ARGV[1] then
  return {0}
end
local now, tm = now_ms()
local first = 3 + m -- the first entry id
local n = #ARGV - first + 1
local climit, cdelay = 0, 0
if m > 0 then
  local contribs, lim, own = {}, nil, 0
  local rules = {nums(ARGV[2], 2 * m, 49)} -- past the 6 numbers above
  for i = 1, m do
    local c = {ARGV[2 + i], rules[2 * i - 1], rules[2 * i]}
    contribs[#contribs + 1] = c
    lim, own = math.min(lim or c[2], c[2]), math.max(own, c[3])
  end
  climit, cdelay, ttl = apply_ceiling(now, rulems, contribs, true, lim, own, ttl)
end
local oldest, card, new = prune(now, lease, ttl)
local nxt = tonumber(got[2] or '0')
local c = redis.call('INCRBY', K[3], n)
if c == n then
  local young = node_young(need)
  if young > 0 then
    redis.call('DEL', K[3], K[4])
    return {2, young}
  end
end
local at = ms_text(tm)
for i = 1, n do
  redis.call('ZADD', K[1], at, ARGV[first - 1 + i])
  redis.call('ZADD', K[2], int_text(c - n + i), ARGV[first - 1 + i])
end
touch(ttl, lease, new)
redis.call('DEL', K[4])
local hcap, hdelay = health_head(got[3])
local front, back = wait_hints(now, lease, nxt, oldest)
return {1, card, nxt, front, back, now, climit, cdelay, hcap, hdelay}
