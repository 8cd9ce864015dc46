-- hotrank: a split site's count stage (docs/redis-keys.md, "Not built
-- yet"), in one shard's slot: applies the shard's outbox entry of one
-- batch (gate_stage.lua) once. The script is this, common.lua, apply.lua
-- and count_stage_end.lua.
--
-- KEYS: every key it touches (declared.lua checks the names it names).
-- ARGV: site prefix, batch id, shard, the entry. Returns 1 applied, 0
-- applied before (its marker `gate:done:<batch>` in the shard's slot,
-- kept a day).
local P, batch_id, shard = ARGV[1], ARGV[2], tonumber(ARGV[3])
local done_key = K(shard_prefix(P, shard) .. 'gate:done:' .. batch_id)
if redis.call('EXISTS', done_key) == 1 then return 0 end
local d = cmsgpack.unpack(ARGV[4])
local now, hkeep, dkeep = d[1], d[2], d[3]
local ev, verdicts, counted = {}, {}, 0
for i, x in ipairs(d[4]) do
  ev[i] = {
    kind = x[1], art = x[2], vb = x[3], secs = x[4],
    hour = math.floor(x[5] / 3600), day = math.floor(x[5] / 86400), tally = x[7] == 1,
  }
  verdicts[i] = x[6]
  if x[6] == 0 then counted = counted + 1 end
end
-- New articles: the first to set publishedAt registers (a batch gated
-- on an older read may name one another registered meanwhile).
for _, a in ipairs(d[5]) do
  local id, published = a[1], a[2]
  if redis.call('HSETNX', AK(P, id) .. 'meta:article:' .. id, 'publishedAt', published) == 1 then
    redis.call('ZADD', SK(P, id) .. 'articles:new', published, id)
    redis.call('INCR', LK(P, shard) .. 'stats:articles')
  end
end
