-- next.lua: hand out the next URL of a site that is ready.
-- KEYS[1] ready    ZSET site -> server ms from which the site may be tried
-- KEYS[2] inflight ZSET item id -> server ms when it is handed out again
-- KEYS[3] items    HASH item id -> "<site>\n<item json>" for items in flight
-- KEYS[4] counts   HASH queued, done, failed, admitted, ids
-- KEYS[5] scope    SET of the sites whose links the crawl follows (only counted here)
-- ARGV[1] prefix of site queue keys (same hash tag)   ARGV[2] visibility ms
-- ARGV[3] key TTL ms
-- Returns {1, id, site, item, scope size} or
-- {0, queued, in flight, ms until something may be ready (-1: unknown), scope size}:
-- the scope only grows, so its size tells a worker when its copy is stale.
local now = now_ms()
local vis, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])

-- Items whose worker went quiet past the visibility timeout go back to the
-- head of their site's queue: at-least-once, nothing lost.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)) do
  local v = redis.call('HGET', KEYS[3], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('HDEL', KEYS[3], id)
  if v then
    local nl = string.find(v, '\n', 1, true)
    local site = string.sub(v, 1, nl - 1)
    redis.call('LPUSH', ARGV[1] .. site, string.sub(v, nl + 1))
    redis.call('PEXPIRE', ARGV[1] .. site, ttl)
    local s = redis.call('ZSCORE', KEYS[1], site)
    if not s or tonumber(s) > now then
      redis.call('ZADD', KEYS[1], now, site)
    end
    redis.call('HINCRBY', KEYS[4], 'queued', 1)
  end
end

for _ = 1, 20 do
  local pick = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, 1)
  if #pick == 0 then
    break
  end
  local site = pick[1]
  local q = ARGV[1] .. site
  local item = redis.call('LPOP', q)
  if item then
    if redis.call('LLEN', q) == 0 then
      redis.call('ZREM', KEYS[1], site)
    else
      redis.call('ZADD', KEYS[1], back_of_line(KEYS[1], now), site) -- round robin
    end
    local id = tostring(redis.call('HINCRBY', KEYS[4], 'ids', 1))
    redis.call('ZADD', KEYS[2], now + vis, id)
    redis.call('HSET', KEYS[3], id, site .. '\n' .. item)
    redis.call('HINCRBY', KEYS[4], 'queued', -1)
    for i = 1, 5 do
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    return {1, id, site, item, redis.call('SCARD', KEYS[5])}
  end
  redis.call('ZREM', KEYS[1], site) -- an empty queue left in ready
end

local queued = tonumber(redis.call('HGET', KEYS[4], 'queued') or '0')
local inflight = redis.call('ZCARD', KEYS[2])
local wait = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then
  wait = math.max(0, tonumber(first[2]) - now)
end
local soonest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if soonest[2] then
  local w = math.max(0, tonumber(soonest[2]) - now)
  if wait < 0 or w < wait then
    wait = w
  end
end
return {0, queued, inflight, wait, redis.call('SCARD', KEYS[5])}
