-- servertime.lua: the Redis server's clock, prepended to the limiter's and
-- the frontier's scripts (not run on its own).

-- The server time in ms, rounded down (for leases and ordering) and up
-- (for the start of a hold-off, a crawl delay or backoff: a delay is a
-- minimum, so it must not start in the millisecond that has already begun);
-- and TIME's reply, for ms_text.
-- sec_text and sec_ms are the seconds of the last TIME read, as TIME gave
-- them and in ms: run as a library of Redis Functions (internal/luafn),
-- whose locals outlive a call, the calls of one second parse them once
-- (equal strings are one object in Lua, so the test is a pointer's; each
-- tonumber is a strtod, some 1,000 instructions).
local sec_text, sec_ms
local function server_ms()
  local t = redis.call('TIME')
  if t[1] ~= sec_text then
    sec_text, sec_ms = t[1], tonumber(t[1]) * 1000
  end
  local us = tonumber(t[2])
  return sec_ms + math.floor(us / 1000), sec_ms + math.ceil(us / 1000), t
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
