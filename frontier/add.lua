-- add.lua: admit new URLs into a shard, each once per crawl.
-- KEYS and ARGV[1..5]: see common.lua.
-- ARGV[7] the crawl's scope size to note in counts (0: none; it only grows)
-- ARGV[8..] quadruples: fingerprint, seen bucket, site, item json
-- Returns {1, admitted, 0, -1}.
if ARGV[7] ~= '0' and tonumber(ARGV[7]) > scope() then
  redis.call('HSET', KEYS[4], 'scope', ARGV[7])
end
local added = admit(8)
keep()
return {1, added, 0, -1}
