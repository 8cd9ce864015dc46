-- hotrank: seed 003 posting. The id comes from the `article:` counter
-- (skipping ids taken otherwise), the poster's vote is recorded in
-- voted:<id> (expiring when voting closes), and the seed's time: and
-- score: sorted sets get the article.
--
-- ARGV: prefix, publishedAt (now), poster (hex), voting window (s), then
-- field/value pairs of the metadata. Returns the new id.
local P, published, poster, window = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local id
repeat
  id = tostring(redis.call('INCR', P .. 'article:'))
until redis.call('EXISTS', P .. 'meta:article:' .. id) == 0
local meta = P .. 'meta:article:' .. id
local args = { 'publishedAt', published, 'known', '1', 'deleted', '0' }
for i = 5, #ARGV do args[#args + 1] = ARGV[i] end
redis.call('HSET', meta, unpack(args))
redis.call('INCR', P .. 'stats:articles')
redis.call('ZADD', P .. 'articles:new', published, id)
redis.call('ZADD', P .. 'time:', published, id)
redis.call('ZADD', P .. 'score:', published, id)
local voted = P .. 'voted:' .. id
redis.call('SADD', voted, poster)
redis.call('EXPIRE', voted, window)
local seq = redis.call('INCR', P .. 'changes:seq')
redis.call('ZADD', P .. 'changes', seq, id)
return id
