-- check.lua: heartbeat an entry (permit or waiter) and report where it stands.
-- Used by waiters to see whether they have reached the front, and as Refresh
-- for held permits. Needs no lock: an entry's rank can only fall.
-- KEYS[1] and K: see common.lua.
-- ARGV[1] entry id   ARGV[2] the numbers, packed (luanums): limit, lease
-- ms, key TTL ms, ceil (1 = apply the site's ceiling, ceiling.lua, read
-- only), the rule's delay ms, how long a contributor's rule counts (ms),
-- adaptive (1 = adaptive politeness: the site's health record tightens the
-- limit and delay, adaptive.lua)
-- Returns, packed (luanums), state, server ms, rank, wait ms, limit, delay
-- ms, cap, extra delay ms: the rule applied (the ceiling's) and the health's effective
-- cap (0: not reduced) and extra delay, which tighten it; state 1 granted, 2 queued,
-- 5 lost (the entry's lease had run out, or it was released).
K = site_keys(KEYS)
local id = ARGV[1]
local limit, lease, ttl, ceil, delay, rulems, adaptive = nums(ARGV[2], 7)
local now, tm = now_ms()
if ceil == 1 then
  limit, delay, ttl = apply_ceiling(now, rulems, {}, false, limit, delay, ttl)
end
local oldest, _, new = prune(now, lease, ttl)
local rank = redis.call('ZRANK', K[2], id)
if not rank then
  redis.call('ZREM', K[1], id)
  return packed(5, now, -1, 0, limit, delay, 0, 0)
end
redis.call('ZADD', K[1], 'XX', ms_text(tm), id)
touch(ttl, lease, new)
local nxt, elimit, hcap, hdelay
if adaptive == 1 then
  local got = redis.call('MGET', K[5], K[6])
  nxt = tonumber(got[1] or '0')
  hcap, hdelay = health_head(got[2])
  elimit = tighten(hcap, hdelay, limit, 0)
else
  nxt, elimit, hcap, hdelay = next_at(), limit, 0, 0
end
if rank < elimit and now >= nxt then
  return packed(1, now, rank, 0, limit, delay, hcap, hdelay)
end
return packed(2, now, rank, wait_hint(now, lease, rank, elimit, nxt, oldest), limit, delay, hcap, hdelay)
