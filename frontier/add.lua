-- add.lua: admit new URLs into a shard, each once per crawl.
-- KEYS and ARGV[1..5]: see common.lua.
-- ARGV[6] the crawl's scope size to note in counts (0: none; it only grows)
-- ARGV[7..] quadruples: fingerprint, seen bucket, site, item json
-- Returns {1, admitted, scope size, -1}.
if tonumber(ARGV[6]) > tonumber(redis.call('HGET', KEYS[4], 'scope') or '0') then
  redis.call('HSET', KEYS[4], 'scope', ARGV[6])
end
local added = admit(7)
return {1, added, keep(), -1}
