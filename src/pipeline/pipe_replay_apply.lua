-- hotrank pipeline: in the replay script, between gate.lua and apply.lua:
-- only the entries the archive does not include are applied, with the
-- verdict decided before the disaster when there was one.
--
-- The store totals (`stats:counted`, `stats:quarantine`, the hourly
-- tallies) were archived at a position of their own: apply.lua adds to
-- them what it adds to the articles, so an entry the totals include but
-- its article does not is taken off them here, and one its article
-- includes but the totals do not is added, each with the verdict the
-- totals' position gave it (or the gate gives now).
do
  local QN = { 'q_dup', 'q_rl', 'q_bot', 'q_rep' }
  local QS = { 1, 2, 3, 4, nil, nil, 3, 3 }
  local dc, dq, dqh = 0, { 0, 0, 0, 0 }, {}
  local function effect(e, v, by)
    v = tonumber(v)
    if v == 0 then
      dc = dc + by
    elseif v and QS[v] then
      local s = QS[v]
      dq[s] = dq[s] + by
      local h = dqh[e.hour]
      if not h then h = { 0, 0, 0, 0 }; dqh[e.hour] = h end
      h[s] = h[s] + by
    end
  end
  for i, e in ipairs(ev) do
    if e.t_included ~= e.included or e.t_decided ~= e.decided then
      if not e.t_included then effect(e, e.t_decided or verdicts[i], 1) end
      if not e.included then effect(e, e.decided or verdicts[i], -1) end
    end
  end
  if dc ~= 0 then redis.call('INCRBY', P .. 'stats:counted', dc) end
  for s = 1, 4 do
    if dq[s] ~= 0 then redis.call('HINCRBY', P .. 'stats:quarantine', QN[s], dq[s]) end
  end
  for hour, h in pairs(dqh) do
    local key = P .. 'stats:quarantine:h:' .. hour
    for s = 1, 4 do
      if h[s] ~= 0 then redis.call('HINCRBY', key, QN[s], h[s]) end
    end
    redis.call('EXPIRE', key, ttl((hour + 1) * 3600 + dkeep))
  end
end
do
  local kept, kv = {}, {}
  counted = 0
  for i, e in ipairs(ev) do
    if not e.included then
      kept[#kept + 1] = e
      kv[#kv + 1] = e.decided or verdicts[i]
      if tonumber(kv[#kv]) == 0 then counted = counted + 1 end
    end
  end
  ev, verdicts = kept, kv
end
if #ev == 0 then return { 0, 0 } end
