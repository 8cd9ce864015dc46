-- hotrank: the site's totals of a gated batch (docs/redis-keys.md,
-- "Counters"): counted events and quarantine tallies, all and per hour.
-- A chunk after gate.lua or apply.lua (with `P`, `now`, `dkeep`, `ev`,
-- `verdicts`, `counted`, and common.lua's `ttl`); its keys are the site's
-- own, so over a split site the gate stage writes them.
local TNAMES = { 'q_dup', 'q_rl', 'q_bot', 'q_rep' }
local TSLOT = { 1, 2, 3, 4, nil, nil, 3, 3 }
local q_global, q_hour = { 0, 0, 0, 0 }, {}
for i, e in ipairs(ev) do
  local slot = TSLOT[verdicts[i]]
  if slot then
    q_global[slot] = q_global[slot] + 1
    local qh = q_hour[e.hour]
    if not qh then qh = { 0, 0, 0, 0 }; q_hour[e.hour] = qh end
    qh[slot] = qh[slot] + 1
  end
end
if counted > 0 then redis.call('INCRBY', P .. 'stats:counted', counted) end
for v = 1, 4 do
  if q_global[v] > 0 then
    redis.call('HINCRBY', P .. 'stats:quarantine', TNAMES[v], q_global[v])
  end
end
for hour, qh in pairs(q_hour) do
  local key = P .. 'stats:quarantine:h:' .. hour
  for v = 1, 4 do
    if qh[v] > 0 then redis.call('HINCRBY', key, TNAMES[v], qh[v]) end
  end
  redis.call('EXPIRE', key, ttl((hour + 1) * 3600 + dkeep))
end
