-- ceiling.lua: the site's ceiling, prepended to the scripts that apply a
-- rule (not run on its own). Used only for a rule with a contributor
-- (Rule.From): a site keyed by registered domain, whose hosts each read their
-- own robots.txt, applies the strictest rule any of them asked for recently.
--
--   K[7] rules  HASH  field = contributor (a host), value =
--                        "<limit> <delay ms> <server ms when written>"
--
-- An entry counts for `keep` ms after it was written; a contributor rewrites
-- its entry when its rule changes, or when the entry is older than keep/8, so
-- a host that keeps asking stays counted. At most ceiling_max contributors
-- have entries of their own; one more is folded into the field '*', which
-- holds the strictest rule of those folded (lowest limit, longest delay), so
-- the bound never loosens the ceiling; a looser rule folded in does not
-- keep it alive. Every write sets the hash's TTL to
-- keep, so a site nobody asks about leaves nothing behind.

local ceiling_max = 64

-- ceiling reads the rules in force at now and, with write, records those of
-- contribs (a list of {from, limit, delay ms}), which replace what their
-- contributors recorded before. It returns the strictest limit and longest
-- delay of the entries in force (a delay forcing limit 1), or nil when there
-- are none.
local function ceiling(now, keep, contribs, write)
  local all = redis.call('HGETALL', K[7])
  local have, live, stale = {}, 0, {}
  for i = 1, #all, 2 do
    local l, d, at = string.match(all[i + 1], '^(%d+) (%d+) (%d+)$')
    at = tonumber(at)
    if not at or at + keep <= now then
      stale[#stale + 1] = all[i]
    else
      have[all[i]] = {tonumber(l), tonumber(d), at}
      if all[i] ~= '*' then
        live = live + 1
      end
    end
  end
  if write then
    local set = {}
    for _, c in ipairs(contribs) do
      local from, l, d = c[1], c[2], c[3]
      local e = have[from]
      local skip = false
      if not e and live >= ceiling_max then
        -- Full: fold into '*', never loosening it. A rule no stricter than
        -- what '*' holds leaves it alone, time included: a strict rule
        -- folded there lives only as long as strict askers come back, not
        -- as long as anyone folded asks.
        from, e = '*', have['*']
        if e then
          skip = l >= e[1] and d <= e[2]
          l, d = math.min(l, e[1]), math.max(d, e[2])
        end
      end
      if not skip and (not e or e[1] ~= l or e[2] ~= d or now - e[3] >= keep / 8) then
        if not e and from ~= '*' then
          live = live + 1
        end
        have[from] = {l, d, now}
        set[#set + 1] = from
        set[#set + 1] = l .. ' ' .. d .. ' ' .. now
      end
    end
    if #stale > 0 then
      redis.call('HDEL', K[7], unpack(stale))
    end
    if #set > 0 then
      redis.call('HSET', K[7], unpack(set))
      redis.call('PEXPIRE', K[7], keep)
    end
  end
  local lim, del = nil, 0
  for _, e in pairs(have) do
    lim, del = math.min(lim or e[1], e[1]), math.max(del, e[2])
  end
  if lim and del > 0 then
    lim = 1
  end
  return lim, del
end

-- apply_ceiling is limit and delay (ms) tightened by the ceiling (see
-- ceiling), and the key TTL ttl lengthened by as much as the delay grew.
local function apply_ceiling(now, keep, contribs, write, limit, delay, ttl)
  local l, d = ceiling(now, keep, contribs, write)
  if not l then
    return limit, delay, ttl
  end
  local nd = math.max(delay, d)
  if nd > 0 then
    l = 1
  end
  return math.min(limit, l), nd, ttl + nd - delay
end
