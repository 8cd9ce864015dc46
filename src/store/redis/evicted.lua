-- hotrank archive: a batch that touches an evicted article answers
-- { 'evicted', id, ... } before its first write; the caller restores
-- those articles from the archive and sends the same call again (same
-- batch id: nothing of it ran). Put after a head that parsed `ev` (each
-- with `.art`) and defined `P`, before any write (docs/design.md,
-- "Eviction and restore"). One SCARD when nothing is evicted.
for t = 0, (SPLIT and NSHARDS or 1) - 1 do
  -- (Each shard's tombstones when each keeps its own.)
  local tomb = K(LK(P, t) .. 'archive:evicted')
  if redis.call('SCARD', tomb) > 0 then
    local ids, seen, gone = {}, {}, {}
    for _, e in ipairs(ev) do
      if not seen[e.art] then
        seen[e.art] = true
        ids[#ids + 1] = e.art
      end
    end
    for s = 1, #ids, 500 do
      local got = redis.call('SMISMEMBER', tomb, unpack(ids, s, math.min(s + 499, #ids)))
      for j = 1, #got do
        if got[j] == 1 then gone[#gone + 1] = ids[s + j - 1] end
      end
    end
    if #gone > 0 then
      table.insert(gone, 1, 'evicted')
      return gone
    end
  end
end
