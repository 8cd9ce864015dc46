-- hotrank: in front of ingest.lua in a split site's gate stage
-- (docs/redis-keys.md, "One site over many primaries"): the script is this, event.lua,
-- ingest.lua, common.lua, gate.lua, totals.lua and gate_stage.lua, all in
-- the site's slot.
local GATE_STAGE = true
-- A re-sent gate call (same batch id): the recorded verdicts and the
-- batch's outbox entries still pending, one per shard ('' for none).
local function gate_stage_recorded(done, P, batch_id)
  local out = { done }
  for k = 0, NSHARDS - 1 do
    out[#out + 1] = redis.call('GET', K(P .. 'gate:out:' .. k .. ':' .. batch_id)) or ''
  end
  return out
end
