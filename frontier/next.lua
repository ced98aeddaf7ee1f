-- next.lua: hand out the next URL of a ready site of a shard.
-- KEYS, ARGV[1..2]: see common.lua. ARGV[3] the take's id (see take).
-- Returns {1, 0, scope size, 1, id, site, item json, more} or
-- {1, 0, scope size, 0, queued, in flight, ms until something may be ready (-1: unknown), 0},
-- then the instance (common.lua instance_id): the scope only grows, so its
-- size tells a worker when its copy is stale.
begin()
local r = take(ARGV[3])
keep()
return {1, 0, scope(), r[1], r[2], r[3], r[4], r[5], instance_id()}
