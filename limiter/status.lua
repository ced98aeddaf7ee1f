-- status.lua: a read-only look at a site's semaphore.
-- KEYS: see common.lua.   ARGV[1] lease ms
-- Returns {live entries (holders and waiters), ms until the next grant may
-- start (0 if none pending)}.
local now = now_ms()
local live = redis.call('ZCOUNT', KEYS[1], '(' .. (now - tonumber(ARGV[1])), '+inf')
return {live, math.max(0, next_at() - now)}
