-- hotrank: the end of a split site's gate stage (after gate.lua and
-- totals.lua): per shard, an outbox entry `gate:out:<k>:<batch>` with
-- what its count stage applies (the counted events and the quarantine
-- tallies of its articles, and the articles this batch registers), listed
-- by time in `gate:outbox` for the sweeper; the verdicts recorded under
-- the batch id. Returns { verdicts (comma-separated), then per shard its
-- entry ('' for none) }.
local per = {}
local function of_shard(id)
  local k = shard_of(id)
  local p = per[k]
  if not p then
    p = { {}, {} }
    per[k] = p
  end
  return p
end
local vtxt = {}
for i, e in ipairs(ev) do
  local v = verdicts[i]
  vtxt[i] = tostring(v)
  if v == 0 or (e.tally and (v <= 4 or v >= 7)) then
    local evs = of_shard(e.art)[1]
    evs[#evs + 1] = { e.kind, e.art, e.vb, e.secs, e.ts, v, e.tally and 1 or 0, e.net }
  end
end
for _, id in ipairs(new_arts) do
  local reg = of_shard(id)[2]
  reg[#reg + 1] = { id, arts[id].published }
end
local done = table.concat(vtxt, ',')
local out = { done }
local outbox = K(P .. 'gate:outbox')
for k = 0, NSHARDS - 1 do
  local p = per[k]
  if p then
    local entry = cmsgpack.pack({ now, hkeep, dkeep, p[1], p[2] })
    redis.call('SET', K(P .. 'gate:out:' .. k .. ':' .. batch_id), entry)
    redis.call('ZADD', outbox, now, k .. ':' .. batch_id)
    out[#out + 1] = entry
  else
    out[#out + 1] = ''
  end
end
redis.call('SET', batch_key, done, 'EX', BATCH_TTL)
return out
