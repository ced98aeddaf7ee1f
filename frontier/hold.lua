-- hold.lua: keep a site out of Next for a while (its slots are all taken).
-- KEYS[1] ready   ARGV[1] site   ARGV[2] ms
-- Only ever moves the site later, and only a site with URLs queued; a
-- fetch of it that ends (settle.lua 'done') brings it back at once.
redis.call('ZADD', KEYS[1], 'XX', 'GT', now_ms() + tonumber(ARGV[2]), ARGV[1])
return 1
