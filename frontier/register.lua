-- register.lua: note a crawl in the prefix's registry of crawls, and drop
-- the entries of crawls whose keys have expired.
-- KEYS[1] registry  ZSET crawl name -> server ms when its keys expire if no
--                   process refreshes them; the key itself lives as long as
--                   its longest-lived entry
-- ARGV[1] crawl name   ARGV[2] the crawl's TTL ms
local now = now_ms()
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. now)
if redis.call('PTTL', KEYS[1]) < ttl then
  redis.call('PEXPIRE', KEYS[1], ttl)
end
return 1
