-- time.lua: the server time of the node that owns KEYS[1].
-- A plain TIME has no key, so on Redis Cluster it may be answered by another
-- node with another clock; naming the site's lock key routes it to the right one.
-- KEYS[1] the site's lock key (only for routing)   ARGV: none
return redis.call('TIME')
