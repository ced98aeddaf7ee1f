-- touch.lua: keep an item in flight for its worker, a visibility timeout
-- from now, while its turn goes on (a robots.txt fetch and then the page).
-- KEYS, ARGV[1] and the numbers: see common.lua.
-- ARGV[3] the item's in-flight member
-- Returns 1, or 0 when the item is no longer in flight: it was handed out
-- again (its worker had been quiet past the timeout) or settled.
begin()
if not redis.call('ZSCORE', K[2], ARGV[3]) then
  return 0 -- no refresh either: the crawl may have been deleted
end
redis.call('ZADD', K[2], 'XX', now() + vis, ARGV[3])
keep() -- the call may carry the shard's refresh (args)
return 1
