-- hold.lua: keep a site out of Next for a while (its slots are all taken).
-- KEYS, ARGV[1] and the numbers: see common.lua.   ARGV[3] site
-- own number: ms
-- Only ever moves the site later, and only a site with URLs queued; a
-- fetch of it that ends (settle.lua 'fetched') brings it back at once.
begin()
redis.call('ZADD', K[1], 'XX', 'GT', now() + own_nums(1), ARGV[3])
keep()
return 1
