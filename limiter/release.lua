-- release.lua: remove an entry (a released permit or a waiter giving up) and
-- tell the waiters that moved into the first `limit` places.
-- KEYS[1] and K: see common.lua.
-- ARGV[1] entry id   ARGV[2] the numbers below, packed (luanums)
-- ARGV[3] with adaptive politeness the controller's parameters
-- (adapt_params), then the wake-up channels' base (a process's channel is
-- the base and its tag; tail_base)   ARGV[4] the kept rule's contributor
-- (none, or '': no ceiling)
-- The numbers: limit, lease ms, crawl delay ms, held (1 when the entry held
-- a permit: starts the crawl delay), key TTL ms, ceil (1 = apply the
-- site's ceiling, ceiling.lua, read only), how long a contributor's rule
-- counts (ms), then adaptive politeness: on (1), the fetch's outcome class
-- (0: none, record nothing), its time to first byte ms, to last byte ms
-- (-1: unknown), a random number in [-1, 1] (the backoff's jitter); then
-- the keep: keep (1), its rule's limit, delay ms and key TTL ms.
-- With the ceiling, the limit and delay are tightened to it first: a permit
-- granted before a stricter contributor was recorded wakes no more waiters
-- and starts no shorter delay than the site's rule now.
-- When the removed entry was ranked below limit and someone waited behind
-- it, publishes "<limit> <wait ms> <id>..." naming the entries now in the
-- first limit places, on each one's process's channel (tell); wait ms is
-- how long until the site's next-request time (crawl delay or backoff), 0
-- if it has passed. A release whose fetch made the controller raise the
-- site's cap tells the entries ranked below the new limit besides its own
-- likewise, whether or not anyone is left behind them, and whether the
-- entry is removed or keeps its slot: some may have waited under the old
-- cap.
-- With adaptive politeness, the outcome is recorded in the site's health
-- and the controller run first; the limit and delay are then tightened to
-- the site's effective cap and extra delay, and a new backoff holds the
-- whole fleet off (next).
-- keep 1 = keep the slot for the holder's next request to the site when
-- acquire.lua would grant it to a newcomer now (nobody in the line, no
-- hold-off, no site lock, the entry still live): then the entry's lease is
-- renewed and it takes a new counter, instead of being removed, under the
-- kept rule (with a contributor, recorded and ceiled as acquire.lua does).
-- keep 0 = a plain release.
-- Returns one string (a table reply costs Redis some 5,000 instructions
-- more, measured under callgrind): 12 numbers packed (luanums), 1 if the
-- entry was still there else 0, wait ms, limit applied,
-- what the controller changed (adapt's bits), the effective cap (0: not
-- reduced), the extra delay ms, ms the site is held off by its backoff,
-- kept (1: the entry keeps its slot, 0: it was removed), and when
-- kept the server ms, the entry's rank, the kept rule's limit and delay ms
-- (0s when not); then the ids published, separated by spaces
-- so that the releaser can also wake waiters in its own process at once,
-- before the message reaches it.
K = site_keys(KEYS)
local id = ARGV[1]
local limit, lease, delay, held, ttl, ceil, rulems, adaptive, cls, ttfb, ttlb, jit, keep, klimit, kdelay, kttl =
  nums(ARGV[2], 16)
local wait, now, up, tm = 0, nil, nil, nil -- tm: TIME's reply (ms_text)
if ceil == 1 then
  now, up, tm = server_ms()
  limit, delay, ttl = apply_ceiling(now, rulems, {}, false, limit, delay, ttl)
end
local ev, hcap, hdelay, hoff = 0, 0, 0, 0
-- A release that may keep its slot reads the site lock and the
-- next-request mark with the health, in one command (got), for the keep's
-- check; a SET of the mark on the way drops that copy (got = nil).
local keeping = keep == 1 and held == 1
local got
if adaptive == 1 then
  local raw
  if keeping then
    got = redis.call('MGET', K[4], K[5], K[6])
    raw = got[3]
  else
    raw = redis.call('GET', K[6])
  end
  if cls > 0 then
    local P = adapt_params(ARGV[3])
    local clock = function()
      if not now then
        now, up, tm = server_ms()
      end
      return now, up
    end
    local h, ttl
    h, ev, ttl = adapt(record_of(K[6], raw), limit, cls, ttfb, ttlb, jit, P, clock)
    record_put(K[6], h, ttl, P)
    if ev >= 4 then
      -- A new backoff: nobody starts before its end (never shortening a
      -- longer hold-off already there).
      if h[19] > next_at() then
        redis.call('SET', K[5], h[19], 'PX', h[19] - now + lease)
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
if held == 1 and delay > 0 then
  -- The crawl delay starts now, unless a longer hold-off (a Backoff) is in
  -- place: never shorten that.
  if not now then
    now, up, tm = server_ms()
  end
  local at = up + delay
  if at > next_at() then
    redis.call('SET', K[5], at, 'PX', delay + lease + 1)
    got = nil
  end
  wait = delay
end
local owned = redis.call('ZCARD', K[2])
-- The controller raised the cap (adapt's bit 2): entries that queued under
-- the lower one may now be in the first limit places with nobody behind
-- them, where the removal's hand-off below would tell no one.
local raised = math.floor(ev / 2) % 2 == 1 and owned > 1
-- tell_raised tells the entries ranked below limit besides id (the ones
-- still holding ignore it): exactly those that hold a permit under the
-- new cap; returns them, or nil. Made only when raised.
local tell_raised = raised and function()
  now = now or now_ms()
  wait = math.max(wait, next_at() - now)
  local front = {}
  for _, v in ipairs(redis.call('ZRANGE', K[2], '0', int_text(limit - 1))) do
    if v ~= id then
      front[#front + 1] = v
    end
  end
  if #front == 0 then
    return nil
  end
  tell(front, limit .. ' ' .. wait, tail_base(ARGV[3], adaptive))
  return front
end
if keeping then
  -- Kept when acquire.lua would grant the slot to a newcomer once this
  -- entry left (its contributor's rule recorded first, as there): fewer
  -- entries than the limit besides it (without pruning: an expired entry
  -- only makes this keep less often), no hold-off (this release's own delay
  -- or backoff included), no site lock (ModeLocked's). The entry then takes
  -- a new counter, as a newcomer would: the back of the line, so that a
  -- waiter held to a lower limit (a robots.txt fetch) moves up as it would
  -- have.
  if not now then
    now, tm = now_ms()
  end
  if ARGV[4] and ARGV[4] ~= '' then
    klimit, kdelay, kttl = apply_ceiling(now, rulems, {{ARGV[4], klimit, kdelay}}, true, klimit, kdelay, kttl)
  end
  if wait == 0 and hoff == 0 and owned <= tighten(hcap, hdelay, klimit, 0) then
    got = got or redis.call('MGET', K[4], K[5]) -- the site lock, the next-request mark
    local at = tonumber(redis.call('ZSCORE', K[1], id))
    if not got[1] and now >= tonumber(got[2] or '0') and at and at > now - lease then
      local c = redis.call('INCR', K[3])
      if c > 1 then
        redis.call('ZADD', K[2], int_text(c), id)
        redis.call('ZADD', K[1], ms_text(tm), id)
        touch(kttl, lease, false)
        local out = packed(1, 0, limit, ev, hcap, hdelay, hoff, 1, now, owned - 1, klimit, kdelay)
        local told = raised and tell_raised()
        if told then
          out = out .. table.concat(told, ' ')
        end
        return out
      end
      -- No counter under a live entry: not this script's to judge; undo
      -- the INCR and release.
      redis.call('DEL', K[3])
    end
  end
end
local removed, front = 0, nil
if owned > limit then
  -- Someone may be waiting: rank the entry among live ones only. Those
  -- it lets in wait out the site's hold-off, whoever set it (our delay, a
  -- Backoff, another holder's delay), not only this permit's delay.
  now = now or now_ms()
  local _, size = prune(now, lease, ttl, owned)
  wait = math.max(wait, next_at() - now)
  -- With someone behind the first limit places, those places and the
  -- next before the removal: when the entry is in the first limit of them,
  -- the rest are the first limit places after it (one command, where its
  -- rank and the places after would be two).
  local head = size > limit and redis.call('ZRANGE', K[2], '0', int_text(limit))
  removed = redis.call('ZREM', K[1], id)
  redis.call('ZREM', K[2], id)
  if head then
    for i = 1, math.min(#head, limit) do
      if head[i] == id then
        table.remove(head, i)
        front = head
        break
      end
    end
  end
  if front then
    -- Everyone in the first limit places is told, not only the one that
    -- moved up behind the removed entry: the limit may be higher than when
    -- they were last told (a cap that recovers, a looser rule), which puts
    -- more than one of them there for the first time.
    tell(front, limit .. ' ' .. wait, tail_base(ARGV[3], adaptive))
  end
else
  removed = redis.call('ZREM', K[1], id)
  redis.call('ZREM', K[2], id)
end
if raised and not front then
  -- The cap was raised and nobody told above: no one left behind the
  -- first limit places (once expired entries were dropped, or at all),
  -- yet some there may have waited under the old cap.
  front = tell_raised()
end
local out = packed(removed, wait, limit, ev, hcap, hdelay, hoff, 0, 0, 0, 0, 0)
if front then
  out = out .. table.concat(front, ' ') -- ids hold no space (tell)
end
return out
