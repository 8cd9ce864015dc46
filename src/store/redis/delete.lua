-- hotrank: remove an article from every ranking; counters stay.
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: prefix, article id. Returns 0 if unknown or already deleted.
local P, id = ARGV[1], ARGV[2]
local meta = K(P .. 'meta:article:' .. id)
if redis.call('EXISTS', meta) == 0 or redis.call('HGET', meta, 'deleted') == '1' then
  return 0
end
redis.call('HSET', meta, 'deleted', '1')
redis.call('ZREM', K(P .. 'articles:new'), id)
local seq = redis.call('INCR', K(P .. 'changes:seq'))
redis.call('ZADD', K(P .. 'changes'), seq, id)
return 1
