-- acquire.lua: ModeAtomic's whole acquire in one round trip.
-- KEYS[1] and K: see common.lua.
-- ARGV[1] entry id   ARGV[2] the numbers below, packed (luanums)
-- ARGV[3] contributor (none, or '': no ceiling, no extra command)
-- The numbers: limit, lease ms, key TTL ms, join (1 = join the line when
-- not granted, 0 = leave), the age in ms the node needs before it may grant
-- (young.lua), the rule's delay ms, how long a contributor's rule counts
-- (ms), adaptive (1 = adaptive politeness: the site's health record,
-- K[6], read in the same MGET, tightens the limit and delay: adaptive.lua)
-- With a contributor, its rule (limit, delay) is recorded and the site's
-- ceiling applied (ceiling.lua) before anything else.
-- Returns, packed (luanums), state, server ms, rank, wait ms and, but for
-- contended, limit, delay ms, cap, extra delay ms: the rule applied (the ceiling's, not the health's) and the
-- health's effective cap (0: not reduced) and extra delay, which tighten it; state 1 granted, 2 queued, 3 busy,
-- 4 contended (ModeLocked holds the site lock: retry after wait ms), 6 young
-- (the node may have lost permits in a restart: nothing written, retry after
-- wait ms).
K = site_keys(KEYS)
local id = ARGV[1]
local limit, lease, ttl, join, need, delay, rulems, adaptive = nums(ARGV[2], 8)
local now, tm = now_ms()
local got
if adaptive == 1 then
  got = redis.call('MGET', K[4], K[5], K[6]) -- the site lock, the next-request mark, the health
else
  got = redis.call('MGET', K[4], K[5]) -- the site lock, the next-request mark
end
if got[1] then
  return packed(4, now, -1, math.max(1, redis.call('PTTL', K[4])))
end
if ARGV[3] and ARGV[3] ~= '' then
  limit, delay, ttl = apply_ceiling(now, rulems, {{ARGV[3], limit, delay}}, true, limit, delay, ttl)
end
-- The rule (limit, delay) is returned as asked (and ceiled); the health's
-- cap and delay (hcap, hdelay) tighten it to elimit for the grant.
local hcap, hdelay = health_head(got[3])
local elimit = tighten(hcap, hdelay, limit, 0)
local oldest, rank, new = prune(now, lease, ttl)
local nxt = tonumber(got[2] or '0')
local free = rank < elimit and now >= nxt
if free or join == 1 then
  local c = redis.call('INCR', K[3])
  if c == 1 then
    -- The site had no counter: the restart guard (young.lua). Take the
    -- counter back out if the node is too young, so nothing is written.
    local young = node_young(need)
    if young > 0 then
      redis.call('DEL', K[3])
      return packed(6, now, -1, young, limit, delay, hcap, hdelay)
    end
  end
  redis.call('ZADD', K[1], ms_text(tm), id)
  redis.call('ZADD', K[2], int_text(c), id)
  touch(ttl, lease, new)
  oldest = oldest or now
end
if free then
  return packed(1, now, rank, 0, limit, delay, hcap, hdelay)
end
return packed(join == 1 and 2 or 3, now, rank, wait_hint(now, lease, rank, elimit, nxt, oldest), limit, delay, hcap, hdelay)
