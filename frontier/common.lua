-- common.lua: the shard state and its rules, prepended to add.lua, next.lua,
-- settle.lua and hold.lua (not run on its own). Every script of a shard
-- takes the same keys, all in the shard's hash tag:
-- KEYS[1] ready    ZSET site -> server ms from which it may be tried; only sites
--                  with URLs queued; PARKED for a site at its cap
-- KEYS[2] inflight ZSET item id -> server ms when it is handed out again
-- KEYS[3] items    HASH item id -> "<site>\n<item json>" for items in flight
-- KEYS[4] counts   HASH queued, admitted, seen, done, skipped, failed, ids, scope
-- KEYS[5] fly      HASH site -> items of the site in flight (absent: 0)
-- KEYS[6] rules    HASH site -> "<cap> <delay ms>" as a settlement last reported
-- KEYS[7] after    HASH site -> server ms before which a site with nothing
--                  queued may not start (its rule's delay after a settlement)
-- ARGV[1] key base: queues are base..'q:'..site, seen buckets base..'seen:'..n
-- ARGV[2] key TTL ms   ARGV[3] visibility ms   ARGV[4] default cap
-- ARGV[5] page limit (0: none)   ARGV[6..] the script's own
local PARKED = 1e15 -- a site at its cap: out of the ready set until one settles
local base, ttl, vis = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local defcap, limit = tonumber(ARGV[4]), tonumber(ARGV[5])
local fresh = {} -- keys this call may have created: they get a TTL (keep)
local delta = {} -- counts increments, written once at the end (keep)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local function count(field, n)
  delta[field] = (delta[field] or 0) + n
end

local function qkey(site)
  return base .. 'q:' .. site
end

-- Scores are server ms. A site is ready when its score is at most now +
-- SOON: round-robin places (below) are fractions of a millisecond past now,
-- real waits whole milliseconds.
local SOON = 0.5

-- The score that puts a site behind every site that is ready or was just
-- served, even within the same millisecond (ties would go by name): the
-- back of the round-robin line. When no site has been served this
-- millisecond, that is now.
local function back_of_line()
  local last = redis.call('ZREVRANGEBYSCORE', KEYS[1], now + SOON, '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  if last[2] and tonumber(last[2]) >= now then
    return tonumber(last[2]) + 0.001
  end
  return now
end

-- rule is the site's cap and delay (ms): what a settlement last reported,
-- or the default cap and no delay; and the stored text (nil: none). A
-- call reads each site's once.
local rules = {}
local function rule(site)
  local r = rules[site]
  if not r then
    r = redis.call('HGET', KEYS[6], site) or false
    rules[site] = r
  end
  if not r then
    return defcap, 0, nil
  end
  local sp = string.find(r, ' ', 1, true)
  return tonumber(string.sub(r, 1, sp - 1)), tonumber(string.sub(r, sp + 1)), r
end

-- fly adds n to the site's items in flight and returns the new number.
local function fly(site, n)
  local f = redis.call('HINCRBY', KEYS[5], site, n)
  if f <= 0 then
    redis.call('HDEL', KEYS[5], site)
    return 0
  end
  fresh[KEYS[5]] = true
  return f
end

-- join puts a site whose queue was empty into the ready set, from at: parked
-- if it is at its cap, and not before the end of its delay.
local function join(site, at)
  local cap = rule(site)
  if tonumber(redis.call('HGET', KEYS[5], site) or '0') >= cap then
    at = PARKED
  else
    local nb = redis.call('HGET', KEYS[7], site)
    if nb then
      redis.call('HDEL', KEYS[7], site)
      at = math.max(at, tonumber(nb))
    end
  end
  redis.call('ZADD', KEYS[1], at, site)
  fresh[KEYS[1]] = true
end

-- admit takes quadruples from ARGV[i0]: fingerprint, seen bucket, site,
-- item json; each new fingerprint is queued (within the page limit). It
-- returns how many were admitted.
local function admit(i0)
  local admitted, added = 0, 0
  if limit > 0 then
    admitted = tonumber(redis.call('HGET', KEYS[4], 'admitted') or '0')
  end
  for i = i0, #ARGV, 4 do
    local sk = base .. 'seen:' .. ARGV[i + 1]
    if redis.call('SADD', sk, ARGV[i]) == 1 then
      fresh[sk] = true
      count('seen', 1)
      if limit == 0 or admitted + added < limit then
        local site = ARGV[i + 2]
        local q = qkey(site)
        if redis.call('RPUSH', q, ARGV[i + 3]) == 1 then
          fresh[q] = true
          join(site, now)
        end
        added = added + 1
      end
    end
  end
  count('queued', added)
  count('admitted', added)
  return added
end

-- take hands out the next item of a ready site: {1, id, site, item}, or
-- {0, queued, in flight, ms until something may be ready (-1: unknown)}.
local function take()
  -- Items whose worker went quiet past the visibility timeout go back to the
  -- head of their site's queue (at-least-once) and free their site's slot.
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)) do
    local v = redis.call('HGET', KEYS[3], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[3], id)
    if v then
      local nl = string.find(v, '\n', 1, true)
      local site = string.sub(v, 1, nl - 1)
      local f = fly(site, -1)
      local q = qkey(site)
      if redis.call('LPUSH', q, string.sub(v, nl + 1)) == 1 then
        fresh[q] = true
        join(site, now)
      else
        local s = tonumber(redis.call('ZSCORE', KEYS[1], site))
        if f >= rule(site) then
          redis.call('ZADD', KEYS[1], PARKED, site)
        elseif not s or s > now then
          redis.call('ZADD', KEYS[1], now, site)
        end
      end
      count('queued', 1)
    end
  end

  for _ = 1, 20 do
    local pick = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now + SOON, 'LIMIT', 0, 1)
    if #pick == 0 then
      break
    end
    local site = pick[1]
    local q = qkey(site)
    local item = redis.call('LPOP', q)
    if item then
      local f = fly(site, 1)
      if redis.call('LLEN', q) == 0 then
        redis.call('ZREM', KEYS[1], site)
      elseif f >= rule(site) then
        redis.call('ZADD', KEYS[1], PARKED, site) -- at its cap: back when one settles
      else
        redis.call('ZADD', KEYS[1], back_of_line(), site) -- round robin
      end
      local id = tostring(redis.call('HINCRBY', KEYS[4], 'ids', 1))
      redis.call('ZADD', KEYS[2], now + vis, id)
      redis.call('HSET', KEYS[3], id, site .. '\n' .. item)
      fresh[KEYS[2]], fresh[KEYS[3]] = true, true
      count('queued', -1)
      return {1, id, site, item}
    end
    redis.call('ZREM', KEYS[1], site) -- a queue lost (expired) under a ready site
  end

  local queued = tonumber(redis.call('HGET', KEYS[4], 'queued') or '0') + (delta['queued'] or 0)
  local wait = -1
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if first[2] and tonumber(first[2]) < PARKED then
    wait = math.max(0, math.ceil(tonumber(first[2]) - now - SOON))
  end
  local soonest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if soonest[2] then
    local w = math.max(0, tonumber(soonest[2]) - now)
    if wait < 0 or w < wait then
      wait = w
    end
  end
  return {0, queued, redis.call('ZCARD', KEYS[2]), wait}
end

-- keep writes the counts and keeps every key of the shard alive: keys this
-- call created get the TTL (PEXPIRE NX), and all the shard's keys get it
-- again only when the counts' TTL has run down by a minute (or a quarter of
-- the TTL), not on every call. It returns the crawl's scope size.
local function keep()
  for field, n in pairs(delta) do
    if n ~= 0 then
      redis.call('HINCRBY', KEYS[4], field, n)
    end
  end
  local left = redis.call('PTTL', KEYS[4])
  if left == -2 then
    return 0
  end
  if left < 0 or ttl - left > math.min(60000, math.floor(ttl / 4)) then
    for i = 1, #KEYS do
      redis.call('PEXPIRE', KEYS[i], ttl)
    end
    for _, site in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
      redis.call('PEXPIRE', qkey(site), ttl)
    end
    for b = 0, 255 do
      redis.call('PEXPIRE', base .. 'seen:' .. b, ttl)
    end
  else
    for k in pairs(fresh) do
      redis.call('PEXPIRE', k, ttl, 'NX')
    end
  end
  return tonumber(redis.call('HGET', KEYS[4], 'scope') or '0')
end
