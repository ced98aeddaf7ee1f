-- servertime.lua: the Redis server's clock, prepended to the limiter's and
-- the frontier's scripts (not run on its own).

-- The server time in ms, rounded down (for leases and ordering) and up
-- (for the start of a hold-off, a crawl delay or backoff: a delay is a
-- minimum, so it must not start in the millisecond that has already begun).
local function server_ms()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]) * 1000, tonumber(t[2])
  return s + math.floor(us / 1000), s + math.ceil(us / 1000)
end

local function now_ms()
  local down = server_ms()
  return down
end
