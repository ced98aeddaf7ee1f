-- release.lua: remove an entry (a released permit or a waiter giving up) and
-- tell the waiters that moved into the first `limit` places.
-- KEYS: see common.lua.
-- ARGV[1] entry id   ARGV[2] limit   ARGV[3] lease ms   ARGV[4] crawl delay ms
-- ARGV[5] '1' when the entry held a permit (starts the crawl delay)
-- ARGV[6] wake-up channel   ARGV[7] key TTL ms
-- ARGV[8] '1' = apply the site's ceiling (ceiling.lua, read only), '' = not
-- ARGV[9] how long a contributor's rule counts (ms)
-- With the ceiling, the limit and delay are tightened to it first: a permit
-- granted before a stricter contributor was recorded wakes no more waiters
-- and starts no shorter delay than the site's rule now.
-- Publishes "<limit> <wait ms> <id>..." naming the entries now ranked below
-- limit, when the removed one was among them and someone waited behind it;
-- wait ms is how long until the site's next-request time (crawl delay or
-- backoff), 0 if it has passed.
-- ARGV[10] '1' = adaptive politeness on (adaptive.lua), '' = off
-- ARGV[11] the fetch's outcome class (0: none, record nothing)
-- ARGV[12] its time to first byte ms, ARGV[13] to last byte ms (-1: unknown)
-- ARGV[14] a random number in [-1, 1] (the backoff's jitter)
-- ARGV[15] the controller's parameters (adapt_params)
-- With adaptive politeness, the outcome is recorded in the site's health
-- and the controller run first; the limit and delay are then tightened to
-- the site's effective cap and extra delay, and a new backoff holds the
-- whole fleet off (next).
-- ARGV[16] '1' = keep the slot for the holder's next request to the site
-- when acquire.lua would grant it to a newcomer now (nobody in the line, no
-- hold-off, no site lock, the entry still live): then the entry's lease is
-- renewed and it takes a new counter, instead of being removed, under the
-- rule ARGV[17] limit, ARGV[18] delay ms, ARGV[19] contributor ('' = none;
-- with one, recorded and ceiled as acquire.lua does), ARGV[20] key TTL ms.
-- '' = a plain release.
-- Returns {1 if the entry was still there else 0, wait ms, limit applied,
-- what the controller changed (adapt's bits), the effective cap (0: not
-- reduced), the extra delay ms, ms the site is held off by its backoff,
-- kept (1: the entry keeps its slot, 0: it was removed), and when
-- kept the server ms, the entry's rank, the kept rule's limit and delay ms
-- (0s when not), then the ids published...}
-- so that the releaser can also wake waiters in its own process directly.
local id, limit, lease, delay, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[7])
local wait, now, up = 0, nil, nil
if ARGV[8] ~= '' then
  now, up = server_ms()
  limit, delay, ttl = apply_ceiling(now, tonumber(ARGV[9]), {}, false, limit, delay, ttl)
end
local ev, hcap, hdelay, hoff = 0, 0, 0, 0
-- A release that may keep its slot reads the site lock and the
-- next-request mark with the health, in one command (got), for the keep's
-- check; a SET of the mark on the way drops that copy (got = nil).
local keeping = ARGV[16] == '1' and ARGV[5] == '1'
local got
if ARGV[10] ~= '' then
  local raw
  if keeping then
    got = redis.call('MGET', KEYS[4], KEYS[5], KEYS[7])
    raw = got[3]
  else
    raw = redis.call('GET', KEYS[7])
  end
  local cls = tonumber(ARGV[11])
  if cls > 0 then
    local P = adapt_params(ARGV[15])
    local clock = function()
      if not now then
        now, up = server_ms()
      end
      return now, up
    end
    local h, ttl
    h, ev, ttl = adapt(health_parse(raw), limit, cls, tonumber(ARGV[12]), tonumber(ARGV[13]), tonumber(ARGV[14]), P, clock)
    redis.call('SET', KEYS[7], health_format(h), 'PX', math.max(1, ttl))
    if ev >= 4 then
      -- A new backoff: nobody starts before its end (never shortening a
      -- longer hold-off already there).
      if h[19] > next_at() then
        redis.call('SET', KEYS[5], h[19], 'PX', h[19] - now + lease)
        got = nil
      end
    end
    if h[18] > 0 and h[19] > now then
      hoff = h[19] - now
    end
    hcap, hdelay = h[1], h[2]
  else
    hcap, hdelay = health_head(raw)
  end
  limit, delay = tighten(hcap, hdelay, limit, delay)
end
if ARGV[5] == '1' and delay > 0 then
  -- The crawl delay starts now, unless a longer hold-off (a Backoff) is in
  -- place: never shorten that.
  if not now then
    now, up = server_ms()
  end
  local at = up + delay
  if at > next_at() then
    redis.call('SET', KEYS[5], at, 'PX', delay + lease + 1)
    got = nil
  end
  wait = delay
end
local owned = redis.call('ZCARD', KEYS[2])
if keeping then
  -- Kept when acquire.lua would grant the slot to a newcomer once this
  -- entry left (its contributor's rule recorded first, as there): fewer
  -- entries than the limit besides it (without pruning: an expired entry
  -- only makes this keep less often), no hold-off (this release's own delay
  -- or backoff included), no site lock (ModeLocked's). The entry then takes
  -- a new counter, as a newcomer would: the back of the line, so that a
  -- waiter held to a lower limit (a robots.txt fetch) moves up as it would
  -- have.
  now = now or now_ms()
  local klimit, kdelay, kttl = tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[20])
  if ARGV[19] ~= '' then
    klimit, kdelay, kttl = apply_ceiling(now, tonumber(ARGV[9]), {{ARGV[19], klimit, kdelay}}, true, klimit, kdelay, kttl)
  end
  if wait == 0 and hoff == 0 and owned <= tighten(hcap, hdelay, klimit, 0) then
    got = got or redis.call('MGET', KEYS[4], KEYS[5]) -- the site lock, the next-request mark
    local at = tonumber(redis.call('ZSCORE', KEYS[1], id))
    if not got[1] and now >= tonumber(got[2] or '0') and at and at > now - lease then
      local c = redis.call('INCR', KEYS[3])
      if c > 1 then
        redis.call('ZADD', KEYS[2], c, id)
        redis.call('ZADD', KEYS[1], now, id)
        touch(kttl, lease, false)
        return {1, 0, limit, ev, hcap, hdelay, hoff, 1, now, owned - 1, klimit, kdelay}
      end
      -- No counter under a live entry: not this script's to judge; undo
      -- the INCR and release.
      redis.call('DEL', KEYS[3])
    end
  end
end
local out = {0, wait, limit, ev, hcap, hdelay, hoff, 0, 0, 0, 0, 0}
if owned > limit then
  -- Someone may be waiting: rank the entry among live ones only. Those
  -- it lets in wait out the site's hold-off, whoever set it (our delay, a
  -- Backoff, another holder's delay), not only this permit's delay.
  now = now or now_ms()
  local _, size = prune(now, lease, ttl, owned)
  wait = math.max(wait, next_at() - now)
  out[2] = wait
  local rank = redis.call('ZRANK', KEYS[2], id)
  out[1] = redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  if rank and rank < limit and size > limit then
    local front = redis.call('ZRANGE', KEYS[2], '0', limit - 1)
    redis.call('PUBLISH', ARGV[6], limit .. ' ' .. wait .. ' ' .. table.concat(front, ' '))
    for _, v in ipairs(front) do
      out[#out + 1] = v
    end
  end
else
  out[1] = redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return out
