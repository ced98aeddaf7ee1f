-- common.lua: helpers prepended to next.lua and settle.lua (not run on its own).

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The score that puts a site behind every site that is ready or was just
-- served, even within the same millisecond (ties would go by name): the
-- back of the round-robin line.
local function back_of_line(ready, now)
  local at = now + 1
  local last = redis.call('ZREVRANGEBYSCORE', ready, now + 1, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if last[2] and tonumber(last[2]) >= at then
    at = tonumber(last[2]) + 1
  end
  return at
end
