-- status.lua: a read-only look at a site's semaphore.
-- KEYS[1] and K: see common.lua.   ARGV[1] lease ms
-- Returns {live entries (holders and waiters), ms until the next grant may
-- start (0 if none pending), the health record (adaptive.lua) or '' if none,
-- the server ms}.
K = site_keys(KEYS)
local now = now_ms()
local live = redis.call('ZCOUNT', K[1], '(' .. (now - tonumber(ARGV[1])), '+inf')
local got = redis.call('MGET', K[5], K[6])
return {live, math.max(0, tonumber(got[1] or '0') - now), got[2] or '', now}
