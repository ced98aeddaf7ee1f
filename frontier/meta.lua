-- meta.lua: record a crawl in its meta HASH, as each process joins it
-- (Frontier.layout). The first process creates it; later ones read it.
-- KEYS[1] meta  HASH shards, created (server ms), seen_key (the key of the
--               seen sets' fingerprints, 32 hex digits; none in a crawl
--               created before it was kept: FNV-1a then): set by the
--               process that created the crawl; scope_rules (ScopeRules JSON): the first
--               rules given (here, by a process given scope options, or by
--               Frontier.Seed, the seeding process's, options or none);
--               max_per_site, site_key, max_pages, ttl
--               (ms): the last process's to join (its processes should all
--               give the same)
-- ARGV[1] shards   ARGV[2] max per site (the frontier's default cap)
-- ARGV[3] site key name   ARGV[4] page limit (0: none)   ARGV[5] TTL ms
-- ARGV[6] this process's scope rules   ARGV[7] '1' if it gave any: then
--         they are stored if none are, stored rules that differ are a
--         conflict, and nothing is written. A process given none stores
--         nothing: it may only be joining, before the crawl is seeded.
-- ARGV[8] a fresh random seen key, stored only if this call creates the
--         crawl
-- Returns {stored shard count, stored scope rules or '' for none yet,
-- stored seen key or '' for none, '1' if this call created the crawl else
-- '0'}.
-- The clock first: a call that fails (an ACL that refuses the user TIME)
-- must fail before it writes, or it leaves a meta without its TTL.
local now = now_ms()
local made = '0'
if redis.call('HSETNX', KEYS[1], 'shards', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'created', now, 'seen_key', ARGV[8])
  made = '1'
end
local key = redis.call('HGET', KEYS[1], 'seen_key') or ''
local rules = redis.call('HGET', KEYS[1], 'scope_rules')
if not rules then
  rules = ''
  if ARGV[7] == '1' then
    rules = ARGV[6]
    redis.call('HSET', KEYS[1], 'scope_rules', rules)
  end
elseif ARGV[7] == '1' and rules ~= ARGV[6] then
  return {redis.call('HGET', KEYS[1], 'shards'), rules, key, made}
end
redis.call('HSET', KEYS[1], 'max_per_site', ARGV[2], 'site_key', ARGV[3], 'max_pages', ARGV[4], 'ttl', ARGV[5])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return {redis.call('HGET', KEYS[1], 'shards'), rules, key, made}
