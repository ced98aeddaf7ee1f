-- servertime.lua: the Redis server's clock, prepended to the limiter's and
-- the frontier's scripts (not run on its own).

-- The server time in ms, rounded down (for leases and ordering) and up
-- (for the start of a hold-off, a crawl delay or backoff: a delay is a
-- minimum, so it must not start in the millisecond that has already begun);
-- and TIME's reply, for ms_text.
local function server_ms()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]) * 1000, tonumber(t[2])
  return s + math.floor(us / 1000), s + math.ceil(us / 1000), t
end

-- now_ms is server_ms's time rounded down, and TIME's reply.
local function now_ms()
  local down, _, t = server_ms()
  return down, t
end

-- ms_text is the time rounded down of TIME's reply t as text, made of
-- TIME's own digits: a number passed to a command costs Redis 7.0 a
-- "%.17g" format, some 3,500 instructions for a time in ms (measured under
-- callgrind), a few string operations less than half that.
local function ms_text(t)
  local us = t[2]
  return t[1] .. string.sub(string.rep('0', 6 - #us) .. us, 1, 3)
end
