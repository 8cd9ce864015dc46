-- hotrank: the article a post creates (post.lua, or post_at.lua over a
-- split site): every name checked, then the writes. Expects the locals
-- P, published, poster, window, per, id and FIRST (the first metadata
-- field/value pair in ARGV).
-- Every name is checked before the first write.
local A = AK(P, id)
local meta, voted = K(A .. 'meta:article:' .. id), K(A .. 'voted:' .. id)
local counters = K(A .. 'counter:article:' .. id)
local S = SK(P, id)
local stats, newest = K(A .. 'stats:articles'), K(S .. 'articles:new')
local vtime, vscore = K(A .. 'time:'), K(A .. 'score:')
local cseq, changes, dirty = K(S .. 'changes:seq'), K(S .. 'changes'), K(A .. 'archive:dirty')
local by = K(S .. 'articles:new:by')
local args = { 'publishedAt', published, 'known', '1', 'deleted', '0' }
for i = FIRST, #ARGV do args[#args + 1] = ARGV[i] end
redis.call('HSET', meta, unpack(args))
redis.call('INCR', stats)
redis.call('ZADD', newest, published, id)
facets_move(by, {}, facets_of(meta, id))
redis.call('ZADD', vtime, published, id)
redis.call('HINCRBY', counters, 'ups', 1)
redis.call('ZADD', vscore, tonumber(published) + per, id)
redis.call('SADD', voted, poster)
redis.call('EXPIRE', voted, window)
local seq = redis.call('INCR', cseq)
redis.call('ZADD', changes, seq, id)
redis.call('SADD', dirty, id)
