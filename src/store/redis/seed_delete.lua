-- hotrank, seed layout: DELETE takes the article out of the seed's
-- `time:`/`score:` (and its voter set) as well as hotrank's rankings;
-- an article only the seed's code posted gets a metadata hash marked
-- deleted, so hotrank answers 404 for it too; the archive writer takes
-- the deletion (archive:dirty), as delete.lua's. The caller then removes
-- `article:<id>` from the `group:<name>` sets.
-- ARGV: prefix, id. Returns 0 if unknown or already deleted.
local P, id = ARGV[1], ARGV[2]
local member = 'article:' .. id
local meta = K(P .. 'meta:article:' .. id)
local vtime, vscore = K(P .. 'time:'), K(P .. 'score:')
local st = redis.call('HMGET', meta, 'publishedAt', 'deleted')
local posted = redis.call('ZSCORE', vtime, member)
if st[2] == '1' or (not st[1] and not posted) then return 0 end
if not st[1] then
  -- (Whole seconds, as hotrank reads it: the site's `time` has a fraction.)
  redis.call('HSET', meta, 'publishedAt', string.format('%d', math.floor(tonumber(posted))))
end
local facets = facets_of(meta, id)
redis.call('HSET', meta, 'deleted', '1')
facets_move(K(P .. 'articles:new:by'), facets, {})
redis.call('ZREM', K(P .. 'articles:new'), id)
redis.call('ZREM', vtime, member)
redis.call('ZREM', vscore, member)
redis.call('DEL', K(P .. 'voted:' .. id))
local seq = redis.call('INCR', K(P .. 'changes:seq'))
redis.call('ZADD', K(P .. 'changes'), seq, id)
redis.call('SADD', K(P .. 'archive:dirty'), id)
return 1
