-- hotrank, seed layout: seed 003 posting with the seed's own keys and
-- member formats, so the seed's code sees the article as its own
-- post_article left it: `article:<id>` (title, link, poster, time, votes
-- = 1), `time:`/`score:` with member `article:<id>`, `voted:<id>` holding
-- the poster's `user:<id>` (expiring when voting closes), and the article
-- in each `group:<name>`. hotrank's own keys (metadata, counters, change
-- log, archive:dirty, the filtered newest index) are written beside them.
--
-- ARGV: prefix, publishedAt (now), poster member, voting window (s),
-- request id (32 hex digits), score per vote, title, link, group count n,
-- n group names, then field/value pairs of the metadata. A call re-sent
-- with the same request id returns the first call's id. Returns the id.
local P, published, poster, window = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local per, title, link, ngroups = tonumber(ARGV[6]), ARGV[7], ARGV[8], tonumber(ARGV[9])
local req = K(P .. 'post:req:' .. ARGV[5])
local done = redis.call('GET', req)
if done then return done end
local counter = K(P .. 'article:')
local n = tonumber(redis.call('GET', counter) or '0')
local id
-- Ids the seed's code (INCR) or hotrank (PUT, events) took are skipped.
repeat
  n = n + 1
  id = tostring(n)
until redis.call('EXISTS', K(P .. 'meta:article:' .. id), K(P .. 'article:' .. id)) == 0
local member = 'article:' .. id
redis.call('SET', counter, n)
local args = { 'publishedAt', published, 'known', '1', 'deleted', '0' }
for i = 10 + ngroups, #ARGV do args[#args + 1] = ARGV[i] end
redis.call('HSET', K(P .. 'meta:article:' .. id), unpack(args))
-- (The filtered newest index, as post_make.lua keeps it: facets.lua.)
facets_move(K(P .. 'articles:new:by'), {}, facets_of(K(P .. 'meta:article:' .. id), id))
redis.call('INCR', K(P .. 'stats:articles'))
redis.call('ZADD', K(P .. 'articles:new'), published, id)
redis.call('HINCRBY', K(P .. 'counter:article:' .. id), 'ups', 1)
redis.call('HSET', K(P .. member), 'title', title, 'link', link, 'poster', poster,
  'time', published, 'votes', 1)
redis.call('ZADD', K(P .. 'time:'), published, member)
redis.call('ZADD', K(P .. 'score:'), tonumber(published) + per, member)
local voted = K(P .. 'voted:' .. id)
redis.call('SADD', voted, poster)
redis.call('EXPIRE', voted, window)
for i = 10, 9 + ngroups do
  redis.call('SADD', K(P .. 'group:' .. ARGV[i]), member)
end
local seq = redis.call('INCR', K(P .. 'changes:seq'))
redis.call('ZADD', K(P .. 'changes'), seq, id)
redis.call('SADD', K(P .. 'archive:dirty'), id)
redis.call('SET', req, id, 'EX', 120)
return id
