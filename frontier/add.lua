-- add.lua: admit new URLs into a shard, each once per crawl.
-- KEYS and ARGV[1..7]: see common.lua.
-- ARGV[8] the crawl's scope size to note in counts (0: none; it only grows)
-- ARGV[9..] quadruples: fingerprint, seen bucket, site, item json
-- Returns {1, admitted, 0, -1}.
if ARGV[8] ~= '0' and tonumber(ARGV[8]) > scope() then
  redis.call('HSET', KEYS[3], 'scope', ARGV[8])
end
local added = admit(9)
keep()
return {1, added, 0, -1}
