-- add.lua: admit new URLs, each once per crawl.
-- KEYS[1] ready   KEYS[2] seen SET of normalised URLs   KEYS[3] counts
-- KEYS[4] scope SET of the sites whose links the crawl follows (its seeds' sites)
-- ARGV[1] prefix of site queue keys   ARGV[2] page limit (0 = none)   ARGV[3] key TTL ms
-- ARGV[4] '1' for seeds: their sites join the scope, whether or not the URL is new
-- ARGV[5..] triples: normalised URL, site, item json
-- Returns the number admitted.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local limit, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
local added = 0
for i = 5, #ARGV, 3 do
  if ARGV[4] == '1' then
    redis.call('SADD', KEYS[4], ARGV[i + 1])
  end
  if redis.call('SADD', KEYS[2], ARGV[i]) == 1 then
    local admitted = tonumber(redis.call('HGET', KEYS[3], 'admitted') or '0')
    if limit == 0 or admitted < limit then
      local q = ARGV[1] .. ARGV[i + 1]
      redis.call('RPUSH', q, ARGV[i + 2])
      redis.call('PEXPIRE', q, ttl)
      redis.call('ZADD', KEYS[1], 'NX', now, ARGV[i + 1])
      redis.call('HINCRBY', KEYS[3], 'queued', 1)
      redis.call('HINCRBY', KEYS[3], 'admitted', 1)
      added = added + 1
    end
  end
end
for i = 1, 4 do
  redis.call('PEXPIRE', KEYS[i], ttl)
end
return added
