-- hold.lua: keep a site out of Next for a while (its slots are all taken).
-- KEYS and ARGV[1..5]: see common.lua.   ARGV[7] site   ARGV[8] ms
-- Only ever moves the site later, and only a site with URLs queued; a
-- fetch of it that ends (settle.lua 'fetched') brings it back at once.
redis.call('ZADD', KEYS[1], 'XX', 'GT', now() + tonumber(ARGV[8]), ARGV[7])
keep()
return 1
