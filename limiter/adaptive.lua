-- adaptive.lua: the site's health and its controller, prepended to the
-- scripts (not run on its own). Used only when adaptive politeness is on,
-- but for tail_base, which every release that wakes waiters calls.
--
--   K[6] health  STRING  the site's health record: a version byte (2)
--                           and 20 little-endian doubles (struct.pack
--                           HEALTH_PACK; a STRING, not a HASH, so acquire
--                           reads it in the MGET it already makes, and
--                           release rewrites it, TTL included, with one SET):
--    1 cap     effective cap (0: not reduced, the rule's limit)
--    2 delay   extra delay ms after each release (0: none)
--    3 fb      smoothed time to first byte, ms (EWMA; -1: no sample yet)
--    4 lb      smoothed time to last byte, ms (EWMA; -1: none)
--    5 best    the best recent fb, ms (-1: none)
--    6 slow    server ms since which fb has been slow (0: it is not)
--    7 run     slow samples in a row
--    8 n       outcomes in the current window (of `window` outcomes)
--    9 ok      of them: responses (not the below)
--   10 thr     429 or 503 (with or without Retry-After)
--   11 e5      other 5xx
--   12 to      timeouts
--   13 ce      connection errors
--   14 good    healthy outcomes since the cap or delay last changed
--   15 win     healthy outcomes needed before the cap grows by one
--   16 hold    outcomes still to ignore after a decrease (cool-down)
--   17 probe   1 while the last change was an increase
--   18 lvl     backoff level: headerless 429/503 in a row, each hold-off
--               double the last
--   19 bu      server ms before which the fleet is held off (backoff)
--   20 bad     server ms of the last headerless 429/503
-- Its TTL is `forgive` past its last write (or past the end of its
-- backoff): a site nobody fetches for that long starts afresh.

-- tighten is limit and delay ms tightened by a health's effective cap c
-- (0: not reduced) and extra delay d ms: the lower cap, the longer delay (a
-- delay forcing limit 1).
local function tighten(c, d, limit, delay)
  if c > 0 and c < limit then
    limit = c
  end
  if d > delay then
    delay, limit = d, 1
  end
  return limit, delay
end

-- A record is packed binary, read and written by one C call each (Redis's
-- struct library: packer, luanums.lua) where a text record takes a pattern
-- match and 20 number formats, some 15 µs of Redis CPU a release more.
-- HEALTH_LEN tells a record of this version from any other (the site then
-- starts afresh). Go reads the same layout (status.go: healthVersion,
-- healthLen, SiteStatus.health) and must change with it.
local HEALTH_PACK = '<Bdddddddddddddddddddd'
local HEALTH_VERSION, HEALTH_LEN = 2, 161

-- health_parse is a record's 20 numbers, or nil for a record that is not
-- one (none, or another version's: the site starts afresh).
local function health_parse(raw)
  if not raw or #raw ~= HEALTH_LEN or string.byte(raw, 1) ~= HEALTH_VERSION then
    return nil
  end
  local h = {nums(raw, 20, 2)} -- past the version byte
  h[21] = nil -- unpack's next position
  return h
end

-- health_head is a record's effective cap and extra delay ms (its first
-- two numbers; 0, 0 without one): all that acquiring reads of it.
local function health_head(raw)
  if not raw or #raw ~= HEALTH_LEN or string.byte(raw, 1) ~= HEALTH_VERSION then
    return 0, 0
  end
  local _, c, d = packer().unpack('<Bdd', raw)
  return c, d
end

local function health_format(h)
  return packer().pack(HEALTH_PACK, HEALTH_VERSION, unpack(h, 1, 20))
end

-- The controller's parameters, the head of release.lua's ARGV[3], in this order:
-- slowdown factor, minimum excess ms, error share, window, window max,
-- cool-down, first delay ms, delay max ms, first backoff ms, backoff max ms,
-- forgive ms, best memory ms, smoothing (EWMA weight of a new sample),
-- slow samples in a row that count as trouble: 14 little-endian doubles
-- (Adaptive.params), unpacked by one C call; the wake-up channels' base
-- follows them (tail_base).
-- A process passes the same parameters on every call: run as a library
-- (luafn), whose locals outlive a call, the last ones read are kept
-- (strings compare by identity in Lua) and not unpacked again. The table
-- is only ever read.
-- forgive_px is the record's usual TTL (forgive) as SET's PX text, made
-- once (a number argument costs Redis a "%.17g" format a call).
local params_text, params
local function adapt_params(s)
  if s ~= params_text then
    local f, ex, sh, w, wm, cd, d0, dm, b, bm, fg, bmem, a, r = nums(s, 14)
    params_text, params = s, {factor = f, excess = ex, share = sh, window = w, winmax = wm, cooldown = cd,
      delay0 = d0, delaymax = dm, backoff = b, backoffmax = bm, forgive = fg, bestmem = bmem, alpha = a, run = r,
      forgive_px = int_text(math.max(1, fg))}
  end
  return params
end

-- tail_base is the wake-up channels' base in release.lua's ARGV[3] s: past
-- the parameters with adaptive politeness (adaptive 1), the whole of s
-- without. Kept, as the parameters are, for the next call with the same s.
local PARAMS_LEN = 14 * 8 -- Adaptive.params's length (TestParamsLenMatchesLua)
local base_of, base_on, base_text
local function tail_base(s, adaptive)
  if s ~= base_of or adaptive ~= base_on then
    base_of, base_on = s, adaptive
    base_text = adaptive == 1 and string.sub(s, PARAMS_LEN + 1) or s
  end
  return base_text
end

-- health_px is a record's TTL ms, as adapt returned it, as SET's PX text.
local function health_px(ttl, P)
  if ttl == P.forgive then
    return P.forgive_px
  end
  return int_text(math.max(1, ttl))
end

-- Outcome classes (limiter.OutcomeClass).
local C_OK, C_THROTTLED, C_RETRY, C_SERVER, C_TIMEOUT, C_CONN = 1, 2, 3, 4, 5, 6
-- SLOT is the record's window count of each class.
local SLOT = {9, 10, 10, 11, 12, 13}

-- slow_vs is whether latency x is slow against the best recent one.
local function slow_vs(x, best, P)
  return x > P.factor * best and x - best > P.excess
end

-- adapt records one fetch's outcome (class cls, ttfb and ttlb ms, -1 when
-- not measured) in health record h (nil: a new one) under the site's rule
-- limit, and runs the controller. clock() returns the server ms (down,
-- up), the same on every call (release.lua's reads TIME once), called
-- only when needed. jit in [-1, 1] spreads the backoff +-10 %.
-- Returns the record and what changed: bit 1 a decrease (cap or delay),
-- bit 2 an increase, bit 4 a new backoff.
local function adapt(h, limit, cls, ttfb, ttlb, jit, P, clock)
  local ev = 0
  if not h then
    h = {0, 0, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0, 0, P.window, 0, 0, 0, 0, 0}
  end
  if h[1] >= limit then
    h[1] = 0
  end
  -- now and up: the server ms, read (clock) where one is needed.
  local now, up
  -- Forgiveness: a backoff level is dropped after `forgive` quiet ms.
  if h[18] > 0 then
    now, up = clock()
    if now - h[20] >= P.forgive then
      h[18] = 0
    end
  end
  -- Latency, from ordinary responses only (an error page is quick).
  local slow = false
  if cls == C_OK and ttfb >= 0 then
    h[3] = h[3] < 0 and ttfb or h[3] + P.alpha * (ttfb - h[3])
    if ttlb >= 0 then
      h[4] = h[4] < 0 and ttlb or h[4] + P.alpha * (ttlb - h[4])
    end
    local fb, best = h[3], h[5]
    if best < 0 or fb < best then
      h[5], h[6], h[7] = fb, 0, 0
    elseif slow_vs(ttfb, best, P) and (slow_vs(fb, best, P) or h[17] == 1) then
      -- Slow now and on average, or now just after an increase (a probe is
      -- judged on its own samples, so a failed one costs few slow fetches).
      -- Slow for bestmem ms on end: the site has got slower for good, and
      -- its best is re-based on what it is now.
      h[7] = h[7] + 1
      now, up = clock()
      if h[6] == 0 then
        h[6] = now
      elseif now - h[6] >= P.bestmem then
        h[5], h[6], h[7] = fb, 0, 0
      end
      slow = h[7] >= P.run
    else
      h[7] = 0
      if not slow_vs(fb, best, P) then
        h[6] = 0
      end
    end
  end
  -- The window's outcomes.
  if h[8] >= P.window then
    h[8], h[9], h[10], h[11], h[12], h[13] = 0, 0, 0, 0, 0, 0
  end
  h[8] = h[8] + 1
  local slot = SLOT[cls]
  h[slot] = h[slot] + 1
  local errs = h[10] + h[11] + h[12] + h[13]
  local trouble = slow or cls == C_THROTTLED or (cls ~= C_OK and errs > P.share * P.window)
  -- A headerless 429/503: hold the fleet off, twice as long as last time,
  -- unless the backoff it belongs to is still on (the same burst).
  if cls == C_THROTTLED then
    now, up = clock()
    if now >= h[19] then
      h[18] = h[18] + 1
      local d = math.min(P.backoff * 2 ^ (h[18] - 1), P.backoffmax)
      d = math.max(1, math.floor(d * (1 + 0.1 * jit)))
      h[19] = up + d
      ev = ev + 4
    end
    h[20] = now
  end
  if h[16] > 0 then
    h[16] = h[16] - 1
  elseif trouble then
    -- Decrease: halve the cap; at 1, add a delay that doubles. Then hold
    -- for the fetches in flight under the old cap, and `cooldown` more, so
    -- one burst is not counted twice.
    local c = h[1] > 0 and h[1] or limit
    if c > 1 then
      h[1] = math.max(1, math.floor(c / 2))
      ev = ev + 1
    elseif P.delaymax > 0 and h[2] < P.delaymax then
      h[2] = h[2] == 0 and math.min(P.delay0, P.delaymax) or math.min(2 * h[2], P.delaymax)
      h[1] = 1
      ev = ev + 1
    end
    if h[17] == 1 then
      -- The last increase led here: probe less often.
      h[15] = math.min(2 * h[15], P.winmax)
    end
    h[14], h[16], h[17] = 0, P.cooldown + c - 1, 0
  elseif cls == C_OK and not (h[7] > 0) then
    -- Healthy: first shrink the delay, then grow the cap by one every win
    -- healthy outcomes. An increase that holds for a whole window halves
    -- the window again (not below `window`).
    if h[2] > 0 then
      h[2] = math.floor(h[2] / 2)
      if h[2] < P.delay0 then
        h[2] = 0
      end
      h[14] = 0
      ev = ev + 2
    elseif h[1] > 0 then
      h[14] = h[14] + 1
      if h[14] >= h[15] then
        if h[17] == 1 then
          h[15] = math.max(P.window, math.floor(h[15] / 2))
        end
        h[1], h[14], h[17] = h[1] + 1, 0, 1
        if h[1] >= limit then
          h[1] = 0
        end
        ev = ev + 2
      end
    end
  end
  -- The record lives `forgive` past this write, or past its backoff's end.
  local ttl = P.forgive
  if h[18] > 0 then
    now, up = clock()
    ttl = math.max(0, h[19] - now) + P.forgive
  end
  return h, ev, ttl
end

-- Parsed records, kept. Run as a library of Redis Functions (luafn) its
-- locals outlive a call: a release keeps the record it wrote, parsed, by
-- key (recs: the text written and its numbers), and the next release of
-- the site takes the numbers from there when the key holds that very text
-- (one compare: Lua strings are interned), which saves unpacking it. The
-- numbers are a function of the text alone, so whoever wrote the key
-- (another database's key of the same name, another writer, an expiry and
-- a new write) the result is the parse's. Every outcome is still written.
-- At most REC_MAX keys, then afresh; as a plain script nothing is kept.
local REC_MAX = 1024
local recs, nrecs = {}, 0

-- record_of is the record in text raw at key k, parsed (health_parse):
-- from recs when it holds that text, which it then gives up (the caller
-- changes the numbers; record_put keeps them again once written).
local function record_of(k, raw)
  local c = recs[k]
  if c then
    recs[k], nrecs = nil, nrecs - 1
    if raw and c.raw == raw then
      return c.h
    end
  end
  return health_parse(raw)
end

-- record_put writes record h to key k with TTL ms ttl (adapt's) and keeps
-- it parsed (as a library).
local function record_put(k, h, ttl, P)
  local raw = health_format(h)
  redis.call('SET', k, raw, 'PX', health_px(ttl, P))
  if LIBRARY then
    if nrecs >= REC_MAX then
      recs, nrecs = {}, 0
    end
    recs[k], nrecs = {raw = raw, h = h}, nrecs + 1
  end
end
