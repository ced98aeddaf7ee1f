-- backoff.lua: hold the whole fleet off a site: no permit is granted before
-- now + ARGV[1] ms (the site's Retry-After). Never shortens an existing mark.
-- KEYS[1] and K: see common.lua (uses K[5], next).
-- ARGV[1] backoff ms   ARGV[2] lease ms
-- Returns the server ms before which no permit will be granted.
K = site_keys(KEYS)
local _, now = server_ms()
local want = now + tonumber(ARGV[1])
local nxt = next_at()
if want > nxt then
  redis.call('SET', K[5], want, 'PX', want - now + tonumber(ARGV[2]))
  return want
end
return nxt
