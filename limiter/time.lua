-- time.lua: the server time of the node that owns the site, and its restart
-- guard (young.lua), for ModeLocked's first round trip.
-- A plain TIME has no key, so on Redis Cluster it may be answered by another
-- node with another clock; naming the site's keys routes it to the right one.
-- KEYS[1] the site's lock (for routing)   KEYS[2] the site's counter
-- ARGV[1] the age in ms the node needs before it may grant (young.lua)
-- Returns {seconds, microseconds, ms to wait before granting (0: may grant)}.
local t = redis.call('TIME')
return {t[1], t[2], young_wait(KEYS[2], tonumber(ARGV[1]))}
