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
-- Returns {1 if the entry was still there else 0, wait ms, limit applied,
-- the ids published...}
-- so that the releaser can also wake waiters in its own process directly.
local id, limit, lease, delay, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[7])
local wait, now, up = 0, nil, nil
if ARGV[8] ~= '' then
  now, up = server_ms()
  limit, delay, ttl = apply_ceiling(now, tonumber(ARGV[9]), {}, false, limit, delay, ttl)
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
  end
  wait = delay
end
local out = {0, wait, limit}
local owned = redis.call('ZCARD', KEYS[2])
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
    local front = redis.call('ZRANGE', KEYS[2], 0, limit - 1)
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
