-- hotrank: fills `articles:new:by` (KEYS[1]) for live articles of one
-- shard written before the index existed (rank.rs `fill_facets`). After
-- facets.lua. ARGV: prefix, then ids from the shard's `articles:new`.
-- KEYS: the index, then each id's metadata hash. Atomic per call, so a
-- put or delete of one of them is wholly before or after it.
local P = ARGV[1]
local by = K(KEYS[1])
for i = 2, #ARGV do
  local id = ARGV[i]
  local meta = K(AK(P, id) .. 'meta:article:' .. id)
  for _, f in ipairs(facets_of(meta, id)) do redis.call('ZADD', by, 0, f) end
end
return 1
