-- hotrank: create or replace an article's metadata (counters untouched).
--
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: prefix, article id, publishedAt, then field/value pairs.
-- Returns 1 if the article is new to readers (never PUT, or deleted).
local P, id, published = ARGV[1], ARGV[2], ARGV[3]
-- Every name is checked before the first write.
local meta = K(AK(P, id) .. 'meta:article:' .. id)
local S = SK(P, id)
local stats, newest = K(AK(P, id) .. 'stats:articles'), K(S .. 'articles:new')
local cseq, changes, dirty = K(S .. 'changes:seq'), K(S .. 'changes'), K(AK(P, id) .. 'archive:dirty')
local by = K(S .. 'articles:new:by')
local old = facets_of(meta, id)
local st = redis.call('HMGET', meta, 'known', 'deleted')
local created = (st[1] ~= '1' or st[2] == '1') and 1 or 0
if redis.call('EXISTS', meta) == 0 then redis.call('INCR', stats) end
-- The operation number (op_journal.lua) survives the replace.
local ops = redis.call('HGET', meta, 'ops')
redis.call('DEL', meta)
local args = { 'publishedAt', published, 'known', '1', 'deleted', '0' }
for i = 4, #ARGV do args[#args + 1] = ARGV[i] end
if ops then
  args[#args + 1] = 'ops'
  args[#args + 1] = ops
end
redis.call('HSET', meta, unpack(args))
redis.call('ZADD', newest, published, id)
facets_move(by, old, facets_of(meta, id))
local seq = redis.call('INCR', cseq)
redis.call('ZADD', changes, seq, id)
redis.call('SADD', dirty, id)
op_done(meta)
return created
