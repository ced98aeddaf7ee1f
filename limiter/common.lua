-- common.lua: helpers prepended to every limiter script (not run on its own).
-- Every script takes the same KEYS, all hash-tagged with the site so they share
-- one Redis Cluster slot:
--   KEYS[1] holders  ZSET   member = entry id, score = server ms of last acquire/heartbeat
--   KEYS[2] owners   ZSET   member = entry id, score = counter value (fair order)
--   KEYS[3] counter  STRING INCR counter
--   KEYS[4] lock     STRING ModeLocked's site lock (SET NX PX token)
--   KEYS[5] next     STRING server ms before which no permit may be granted (crawl delay)
-- Entries ranked below the limit in owners hold permits; the rest wait in line.
-- Ranks only ever fall (new entries always get a higher counter), so an entry
-- that has once seen rank < limit keeps it until it leaves.

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

-- Drop entries whose lease ran out, from holders and then from owners.
-- ZINTERSTORE rewrites owners, which drops its TTL: set it again.
local function prune(now, lease, ttl)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - lease)
  if redis.call('ZINTERSTORE', KEYS[2], 2, KEYS[2], KEYS[1], 'WEIGHTS', 1, 0) > 0 then
    redis.call('PEXPIRE', KEYS[2], ttl)
  end
end

local function next_at()
  return tonumber(redis.call('GET', KEYS[5]) or '0')
end

-- How long (ms) a waiter at rank should sleep before something can change for
-- it without a wake-up message: the crawl delay when it is already in front,
-- otherwise the moment the oldest entry's lease can run out.
local function wait_hint(now, lease, rank, limit, nxt)
  if rank < limit then
    return math.max(1, nxt - now)
  end
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if oldest[2] then
    return math.max(1, tonumber(oldest[2]) + lease - now + 1)
  end
  return lease
end

local function touch(ttl)
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], ttl)
  end
end
