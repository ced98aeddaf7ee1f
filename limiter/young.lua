-- young.lua: the restart guard, prepended to the scripts that can grant a new
-- entry (not run on its own).
--
-- A Redis that restarted empty (or from an old snapshot) has forgotten the
-- permits it granted, but their holders are still downloading until their next
-- refresh finds the permit gone or their own clock fences them: at most one
-- lease after their last confirmed refresh, which came before the restart. So a
-- node grants nothing until it has been up for lease + crawl delay; the delay
-- because the site's next-request time was forgotten too.
--
-- Only a site with no counter is checked: every live entry keeps its site's
-- counter alive (see touch in common.lua), so a site with a counter has not
-- lost its state, and the check costs nothing in steady use. Until the node
-- is old enough, nothing is written, so the next acquirer checks again.
--
-- uptime_in_seconds counts whole seconds of the wall clock and can be up to 1 s
-- ahead of the true uptime, so need_ms includes that second. A server without
-- that field (an embedded test server) is not guarded.

-- node_young is how long (ms) the node must still wait before it may grant,
-- 0 if it may: the check of a site known to have no counter.
local function node_young(need_ms)
  if need_ms <= 0 then
    return 0
  end
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then
    return 0
  end
  local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)'))
  if not up then
    return 0
  end
  return math.max(0, need_ms - up * 1000)
end

-- young_wait is node_young for the site whose counter is counter_key: 0
-- when the counter exists.
local function young_wait(counter_key, need_ms)
  if need_ms <= 0 or redis.call('EXISTS', counter_key) == 1 then
    return 0
  end
  return node_young(need_ms)
end
