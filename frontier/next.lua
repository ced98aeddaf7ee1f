-- next.lua: hand out the next URL of a ready site of a shard.
-- KEYS, ARGV[1..2]: see common.lua. ARGV[3] the take's id (see take).
-- Returns reply's string (common.lua) for 1 settled, 0 admitted, the scope
-- size and what take took: the scope only grows, so its size tells a
-- worker when its copy is stale. A call sent again (go-redis, after a
-- timeout) gets the same answer (see answered).
begin()
local again = replayed(ARGV[3])
if again then
  return again
end
local took, a, b, c = take(ARGV[3])
keep()
local r = reply(1, 0, scope(), took, a, b, c)
if took == 1 then
  return remember(ARGV[3], r)
end
return r
