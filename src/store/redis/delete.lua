-- hotrank: remove an article from every ranking; counters stay.
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: prefix, article id. Returns 0 if unknown or already deleted.
local P, id = ARGV[1], ARGV[2]
-- Every name is checked before the first write.
local meta = K(AK(P, id) .. 'meta:article:' .. id)
local S = SK(P, id)
local newest, cseq, changes = K(S .. 'articles:new'), K(S .. 'changes:seq'), K(S .. 'changes')
local dirty = K(AK(P, id) .. 'archive:dirty')
local by = K(S .. 'articles:new:by')
if redis.call('EXISTS', meta) == 0 or redis.call('HGET', meta, 'deleted') == '1' then
  return 0
end
local old = facets_of(meta, id)
redis.call('HSET', meta, 'deleted', '1')
facets_move(by, old, {})
redis.call('ZREM', newest, id)
local seq = redis.call('INCR', cseq)
redis.call('ZADD', changes, seq, id)
redis.call('SADD', dirty, id)
op_done(meta)
return 1
