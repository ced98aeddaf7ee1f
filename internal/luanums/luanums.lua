-- luanums.lua: numbers packed in one argument, prepended to the limiter's
-- and the frontier's scripts (not run on its own). It only defines: run as
-- a library of Redis Functions (internal/luafn), its top level runs where
-- no global can be read.

-- packer is Redis's struct library; a Lua without it (the demo's embedded
-- miniredis) gets this stand-in for the formats used here: '<' then 'B' (a
-- byte) and 'd' (a little-endian IEEE 754 double; finite, normal or zero
-- values only), and unpack's starting position. Looked up when first used,
-- not at load.
local function struct_standin()
  local function pack_d(x)
    local sign = 0
    if x < 0 then
      sign, x = 1, -x
    end
    local m, e = 0, 0
    if x > 0 then
      m, e = math.frexp(x) -- x = m * 2^e, 0.5 <= m < 1
      m, e = (m * 2 - 1) * 2 ^ 52, e + 1022
    end
    local b = {}
    for i = 1, 6 do
      b[i] = m % 256
      m = math.floor(m / 256)
    end
    b[7] = (e % 16) * 16 + m
    b[8] = sign * 128 + math.floor(e / 16)
    return string.char(unpack(b))
  end
  local function unpack_d(s, i)
    local b = {string.byte(s, i, i + 7)}
    local e = (b[8] % 128) * 16 + math.floor(b[7] / 16)
    local m = b[7] % 16
    for j = 6, 1, -1 do
      m = m * 256 + b[j]
    end
    local x = 0
    if e > 0 then
      x = math.ldexp(1 + m / 2 ^ 52, e - 1023)
    end
    return b[8] >= 128 and -x or x
  end
  return {
    pack = function(fmt, ...)
      local out, args = {}, {...}
      for i = 2, #fmt do
        local c = string.sub(fmt, i, i)
        out[#out + 1] = c == 'B' and string.char(args[i - 1]) or pack_d(args[i - 1])
      end
      return table.concat(out)
    end,
    unpack = function(fmt, s, init)
      local out, pos = {}, init or 1
      for i = 2, #fmt do
        if string.sub(fmt, i, i) == 'B' then
          out[#out + 1], pos = string.byte(s, pos), pos + 1
        else
          out[#out + 1], pos = unpack_d(s, pos), pos + 8
        end
      end
      out[#out + 1] = pos
      return unpack(out)
    end,
  }
end

local packer_lib
local function packer()
  packer_lib = packer_lib or rawget(_G, 'struct') or struct_standin()
  return packer_lib
end

-- nums reads n numbers packed by the caller as little-endian doubles (Go's
-- luanums.Pack) from string s, from its byte at (1 when nil), and returns
-- them, then the position after them (struct.unpack's results): one C call, where each number as an argument of its own costs Redis
-- a string on the way in and a strtod in tonumber, about 2,000 instructions
-- each (measured under callgrind with Redis 7.0).
local nums_fmt = {}
local function nums(s, n, at)
  local f = nums_fmt[n]
  if not f then
    f = '<' .. string.rep('d', n)
    nums_fmt[n] = f
  end
  return packer().unpack(f, s, at or 1)
end

-- packed is its numbers as one string of little-endian doubles (nums's
-- format; Go reads it with luanums.Ints): a script's reply of one string,
-- where each number of a table reply costs Redis 7.0 some 880
-- instructions (measured under callgrind).
local function packed(...)
  local n = select('#', ...)
  local f = nums_fmt[n]
  if not f then
    f = '<' .. string.rep('d', n)
    nums_fmt[n] = f
  end
  return packer().pack(f, ...)
end

-- int_text is x, a whole number within +-2^53, as text for a command:
-- string.format's '%d' costs about half the "%.17g" that Redis 7.0
-- applies to a number argument (some 1,600 instructions saved for a time
-- in ms, measured under callgrind).
local function int_text(x)
  return string.format('%d', x)
end
