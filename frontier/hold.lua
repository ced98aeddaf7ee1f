-- hold.lua: keep a site out of Next for a while (its slots are all taken).
-- KEYS and ARGV[1..7]: see common.lua.   ARGV[8] site   ARGV[9] ms
-- Only ever moves the site later, and only a site with URLs queued; a
-- fetch of it that ends (settle.lua 'fetched') brings it back at once.
begin()
redis.call('ZADD', KEYS[1], 'XX', 'GT', now() + tonumber(ARGV[9]), ARGV[8])
keep()
return 1
