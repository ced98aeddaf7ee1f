-- unlock.lua: compare-and-delete of ModeLocked's site lock.
-- KEYS[1] lock   ARGV[1] this acquirer's random token
-- Returns 1 if the lock was still ours (so it was held from SET NX until now), else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
