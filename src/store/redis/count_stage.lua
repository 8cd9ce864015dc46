-- hotrank: a split site's count stage (docs/redis-keys.md, "One site
-- over many primaries"), in one shard's slot: applies the shard's outbox entry of one
-- batch (gate_stage.lua) once. The script is this, common.lua, apply.lua
-- and count_stage_end.lua.
--
-- KEYS: every key it touches (declared.lua checks the names it names).
-- ARGV: site prefix, batch id, shard, the entry. Returns 1 applied, 0
-- applied before (its marker `gate:done:<batch>` in the shard's slot,
-- kept a day), or { 'evicted', id, ... } without writing when some of
-- its articles are evicted (the shard's `archive:evicted`): the caller
-- restores them and runs the stage again. Checked here, atomically with
-- the writes, as ingest.lua does on one slot (evicted.lua): an eviction
-- between the gate stage and this one is seen.
local P, batch_id, shard = ARGV[1], ARGV[2], tonumber(ARGV[3])
local done_key = K(shard_prefix(P, shard) .. 'gate:done:' .. batch_id)
local tomb = K(LK(P, shard) .. 'archive:evicted')
if redis.call('EXISTS', done_key) == 1 then return 0 end
local d = cmsgpack.unpack(ARGV[4])
local now, hkeep, dkeep = d[1], d[2], d[3]
local ev, verdicts, counted = {}, {}, 0
for i, x in ipairs(d[4]) do
  ev[i] = {
    -- x[8]: the network block (hex, '' unknown; absent from older entries).
    kind = x[1], art = x[2], vb = x[3], secs = x[4], net = x[8] or '',
    hour = math.floor(x[5] / 3600), day = math.floor(x[5] / 86400), tally = x[7] == 1,
  }
  verdicts[i] = x[6]
  if x[6] == 0 then counted = counted + 1 end
end
if redis.call('SCARD', tomb) > 0 then
  local gone, seen = { 'evicted' }, {}
  for _, e in ipairs(ev) do
    if not seen[e.art] then
      seen[e.art] = true
      if redis.call('SISMEMBER', tomb, e.art) == 1 then gone[#gone + 1] = e.art end
    end
  end
  if #gone > 1 then return gone end
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
