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
-- The site's figures beyond its totals (docs/redis-keys.md, "Counters"),
-- in the same call: quarantine by article (the hour's most held-back
-- articles, at most QA_CAP members `<reason>:<id>`) and by crawler family
-- (`bot` verdicts: the user agent's family, `behaviour` for the behaviour
-- rule's), written only for quarantined events; counted views by minute
-- and the hour's site-wide visitor sketch, one INCRBY and one PFADD per
-- minute and hour of the batch.
local QA_CAP = 400
local qa_hour, crawl_hour, views_min, vis_hour = {}, {}, {}, {}
local function tally(t, k1, k2, by)
  local s = t[k1]
  if not s then s = {}; t[k1] = s end
  s[k2] = (s[k2] or 0) + (by or 1)
end
for i, e in ipairs(ev) do
  local v = verdicts[i]
  local slot = TSLOT[v]
  if slot then
    if e.tally then tally(qa_hour, e.hour, TNAMES[slot] .. ':' .. e.art) end
    if v == 3 then
      local fam = e.fam
      if not fam or fam == '' or fam == '0' or fam == '1' then fam = 'other' end
      tally(crawl_hour, e.hour, fam)
    elseif v >= 7 then
      tally(crawl_hour, e.hour, 'behaviour')
    end
  elseif v == 0 and e.kind == 'v' then
    local m = math.floor(e.ts / 60)
    views_min[m] = (views_min[m] or 0) + 1
    local vs = vis_hour[e.hour]
    if not vs then vs = {}; vis_hour[e.hour] = vs end
    vs[#vs + 1] = e.vb
  end
end
for hour, arts in pairs(qa_hour) do
  local key = P .. 'stats:quarantine:a:h:' .. hour
  for member, by in pairs(arts) do redis.call('ZINCRBY', key, by, member) end
  local over = redis.call('ZCARD', key) - QA_CAP
  if over > 0 then redis.call('ZREMRANGEBYRANK', key, 0, over - 1) end
  redis.call('EXPIRE', key, ttl((hour + 1) * 3600 + dkeep))
end
for hour, fams in pairs(crawl_hour) do
  local key = P .. 'stats:crawler:h:' .. hour
  for fam, by in pairs(fams) do redis.call('HINCRBY', key, fam, by) end
  redis.call('EXPIRE', key, ttl((hour + 1) * 3600 + dkeep))
end
for m, by in pairs(views_min) do
  local key = P .. 'stats:views:m:' .. m
  if redis.call('INCRBY', key, by) == by then
    redis.call('EXPIRE', key, ttl((m + 61) * 60))
  end
end
for hour, vs in pairs(vis_hour) do
  local key = P .. 'hll:site:h:' .. hour
  for s = 1, #vs, 1000 do
    redis.call('PFADD', key, unpack(vs, s, math.min(s + 999, #vs)))
  end
  redis.call('EXPIRE', key, ttl((hour + 1) * 3600 + dkeep))
end
