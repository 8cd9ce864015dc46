-- hotrank: a post over a site spread over cluster slots, second stage
-- (docs/redis-keys.md, "One site over many primaries"), in the slot of the article's
-- shard: creates the article post_id.lua reserved, as post.lua would
-- (post_make.lua follows), unless an article of that id exists.
--
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: prefix, publishedAt (now), poster (hex), voting window (s),
-- request id (32 hex digits), score per vote, the reserved id, then
-- field/value pairs of the metadata. Returns the id, '' when it is taken
-- (nothing written: the caller reserves the next one), or for a call
-- re-sent with the same request id the id it created.
local P, published, poster, window = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local per = tonumber(ARGV[6])
local id = ARGV[7]
local FIRST = 8
local req = K(AK(P, id) .. 'post:req:' .. ARGV[5])
local done = redis.call('GET', req)
if done then return done end
if redis.call('EXISTS', K(AK(P, id) .. 'meta:article:' .. id)) == 1 then return '' end
