-- hotrank: remove an article from every ranking; counters stay.
-- ARGV: prefix, article id. Returns 0 if unknown or already deleted.
local P, id = ARGV[1], ARGV[2]
local meta = P .. 'meta:article:' .. id
if redis.call('EXISTS', meta) == 0 or redis.call('HGET', meta, 'deleted') == '1' then
  return 0
end
redis.call('HSET', meta, 'deleted', '1')
redis.call('ZREM', P .. 'articles:new', id)
local seq = redis.call('INCR', P .. 'changes:seq')
redis.call('ZADD', P .. 'changes', seq, id)
return 1
