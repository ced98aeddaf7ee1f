-- settle.lua: what becomes of an item in flight.
-- KEYS[1] ready   KEYS[2] inflight   KEYS[3] items   KEYS[4] counts
-- ARGV[1] prefix of site queue keys   ARGV[2] id   ARGV[3] how:
--   'done'   fetched (or given up): counted in done, or in failed with ARGV[6] = '1';
--            when fetched, its site, if deferred, takes its turn again at once
--   'head'   back to the head of its site queue (site busy, or the worker stops),
--            the site not ready for ARGV[5] ms
--   'tail'   back to the tail with a new item json ARGV[4] (a retry), site not
--            ready before ARGV[5] ms unless it already is
-- ARGV[4] item json for 'tail'   ARGV[5] delay ms   ARGV[6] failed flag   ARGV[7] key TTL ms
-- Returns 1, or 0 if the item was no longer ours (handed out again after its
-- visibility timeout).
local v = redis.call('HGET', KEYS[3], ARGV[2])
if redis.call('ZREM', KEYS[2], ARGV[2]) == 0 or not v then
  return 0
end
redis.call('HDEL', KEYS[3], ARGV[2])
local how = ARGV[3]
local now = now_ms()
local nl = string.find(v, '\n', 1, true)
local site = string.sub(v, 1, nl - 1)
if how == 'done' then
  redis.call('HINCRBY', KEYS[4], ARGV[6] == '1' and 'failed' or 'done', 1)
  if ARGV[6] ~= '1' then
    -- The fetch has just given its site's slot back: a site deferred as
    -- full takes its turn again now, not when its deferral guessed. LT moves
    -- only a site deferred past the back of the line, so round robin among
    -- ready sites stands; the limiter still decides.
    redis.call('ZADD', KEYS[1], 'XX', 'LT', back_of_line(KEYS[1], now), site)
  end
  return 1
end
local q = ARGV[1] .. site
local at = now + tonumber(ARGV[5])
if how == 'head' then
  redis.call('LPUSH', q, string.sub(v, nl + 1))
  redis.call('ZADD', KEYS[1], at, site)
else
  redis.call('RPUSH', q, ARGV[4])
  redis.call('ZADD', KEYS[1], 'NX', at, site)
end
redis.call('PEXPIRE', q, tonumber(ARGV[7]))
redis.call('HINCRBY', KEYS[4], 'queued', 1)
return 1
