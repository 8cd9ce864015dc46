-- hotrank: a post over a site spread over cluster slots, first stage
-- (docs/redis-keys.md, "One site over many primaries"), in the site's slot: reserves
-- the post's id from the `article:` counter; post_at.lua then creates
-- the article in its shard's slot.
--
-- KEYS: post:id:<hex> (the request's reserved id), article: (the
-- counter). ARGV: the id post_at.lua answered taken ('' at first).
-- Returns the request's id: the one it reserved before (a re-sent call),
-- or, at first or when that one was taken, the next one.
local reserved, counter = K(KEYS[1]), K(KEYS[2])
local got = redis.call('GET', reserved)
if got and got ~= ARGV[1] then return got end
local n = redis.call('INCR', counter)
redis.call('SET', reserved, n, 'EX', 120)
return tostring(n)
