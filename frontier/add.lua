-- add.lua: admit new URLs into a shard, each once per crawl.
-- KEYS, ARGV[1] and the numbers: see common.lua.
-- own numbers: the crawl's scope size to note in counts (0: none; it only
--         grows); Seed gives it (a process joining the crawl), and then the
--         shard is refilled first; the site bound (common.lua sitemax)
-- ARGV[3..] quadruples: fingerprint, seen bucket, site, item json
-- Returns reply (common.lua) for 1 settled and admitted, which counts the refilled
-- URLs too.
begin()

-- refill admits URLs of the overflow (common.lua admit), oldest first, as
-- far as the page limit now allows (all of them with none): a process with
-- a higher limit than the one that kept them continues the crawl. It
-- writes admitted and over at once, so that admit reads them.
local function refill()
  local ov = base .. 'overflow'
  local n = OVERFLOW
  if limit > 0 then
    n = limit - tonumber(redis.call('HGET', K[3], 'admitted') or '0')
  end
  if n <= 0 then
    return 0
  end
  local items = redis.call('LRANGE', ov, 0, n - 1)
  if #items == 0 then
    return 0
  end
  redis.call('LTRIM', ov, #items, -1)
  for _, e in ipairs(items) do
    local nl = string.find(e, '\n', 1, true)
    local site = string.sub(e, 1, nl - 1)
    local q = qkey(site)
    local len = redis.call('RPUSH', q, string.sub(e, nl + 1))
    if len == 1 then
      pushed(q, len)
      join(site, now())
    end
  end
  redis.call('HINCRBY', K[3], 'admitted', #items)
  redis.call('HINCRBY', K[3], 'over', -#items)
  return #items
end

local added = 0
local size
size, sitemax = own_nums(2)
if size ~= 0 then
  if size > scope() then
    redis.call('HSET', K[3], 'scope', int_text(size))
  end
  added = refill()
end
added = added + admit(3)
keep()
return reply(1, added, 0)
