-- delete.lua: compare-and-delete of a key held by a token.
-- KEYS[1] the key   ARGV[1] the holder's token (the value it SET NX)
-- Returns 1 if the key still held the token (so it was held from SET NX
-- until now) and is deleted, else 0 and the key is left alone.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
