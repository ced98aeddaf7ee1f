-- acquire.lua: ModeAtomic's whole acquire in one round trip.
-- KEYS: see common.lua.
-- ARGV[1] entry id        ARGV[2] limit        ARGV[3] lease ms
-- ARGV[4] key TTL ms      ARGV[5] '1' = join the line when not granted, '0' = leave
-- ARGV[6] the age in ms the node needs before it may grant (young.lua)
-- ARGV[7] contributor ('' = none: no ceiling, no extra command)
-- ARGV[8] the rule's delay ms   ARGV[9] how long a contributor's rule counts (ms)
-- ARGV[10] '1' = adaptive politeness: the site's health record (KEYS[7],
-- read in the same MGET) tightens the limit and delay (adaptive.lua)
-- With a contributor, its rule (ARGV[2], ARGV[8]) is recorded and the site's
-- ceiling applied (ceiling.lua) before anything else.
-- Returns {state, server ms, rank, wait ms, limit, delay ms, cap, extra
-- delay ms}: the rule applied (the ceiling's, not the health's) and the
-- health's effective cap (0: not reduced) and extra delay, which tighten it; state 1 granted, 2 queued, 3 busy,
-- 4 contended (ModeLocked holds the site lock: retry after wait ms), 6 young
-- (the node may have lost permits in a restart: nothing written, retry after
-- wait ms).
local id, limit, lease, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
local got
if ARGV[10] == '1' then
  got = redis.call('MGET', KEYS[4], KEYS[5], KEYS[7]) -- the site lock, the next-request mark, the health
else
  got = redis.call('MGET', KEYS[4], KEYS[5]) -- the site lock, the next-request mark
end
if got[1] then
  return {4, now, -1, math.max(1, redis.call('PTTL', KEYS[4]))}
end
local delay = tonumber(ARGV[8])
if ARGV[7] ~= '' then
  limit, delay, ttl = apply_ceiling(now, tonumber(ARGV[9]), {{ARGV[7], limit, delay}}, true, limit, delay, ttl)
end
-- The rule (limit, delay) is returned as asked (and ceiled); the health's
-- cap and delay (hcap, hdelay) tighten it to elimit for the grant.
local hcap, hdelay = health_head(got[3])
local elimit = tighten(hcap, hdelay, limit, 0)
local oldest, rank, new = prune(now, lease, ttl)
local nxt = tonumber(got[2] or '0')
local free = rank < elimit and now >= nxt
if free or ARGV[5] == '1' then
  local c = redis.call('INCR', KEYS[3])
  if c == 1 then
    -- The site had no counter: the restart guard (young.lua). Take the
    -- counter back out if the node is too young, so nothing is written.
    local young = node_young(tonumber(ARGV[6]))
    if young > 0 then
      redis.call('DEL', KEYS[3])
      return {6, now, -1, young, limit, delay, hcap, hdelay}
    end
  end
  redis.call('ZADD', KEYS[1], now, id)
  redis.call('ZADD', KEYS[2], c, id)
  touch(ttl, lease, new)
  oldest = oldest or now
end
if free then
  return {1, now, rank, 0, limit, delay, hcap, hdelay}
end
return {ARGV[5] == '1' and 2 or 3, now, rank, wait_hint(now, lease, rank, elimit, nxt, oldest), limit, delay, hcap, hdelay}
