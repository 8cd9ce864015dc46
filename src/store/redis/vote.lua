-- hotrank: a seed 003 vote. One per user (SADD voted:<id>), while the
-- article is younger than the voting window; then the voter set is freed
-- and the score frozen. The window follows the caller's clock (`now`), as
-- every TTL in this store follows event time.
--
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: prefix, id, user (hex), 'u' or 'd', now, window (s), down-votes
-- allowed ('1'/'0'), score per vote.
-- Returns {ups, downs, publishedAt} (for the score: no read after), or
-- {-1} unknown/deleted, {-2} down-votes disabled, {-3} voting closed, {-4}
-- already voted, {-5} evicted (nothing written: restore it from the
-- archive and vote again).
local P, id, user, dir = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now, window, allow, per = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[7], tonumber(ARGV[8])
-- Every name is checked before the first write.
local A = AK(P, id)
local meta, voted = K(A .. 'meta:article:' .. id), K(A .. 'voted:' .. id)
local counters = K(A .. 'counter:article:' .. id)
local vtime, vscore = K(A .. 'time:'), K(A .. 'score:')
local S = SK(P, id)
local cseq, changes, dirty = K(S .. 'changes:seq'), K(S .. 'changes'), K(A .. 'archive:dirty')
local evicted = K(A .. 'archive:evicted')
local st = redis.call('HMGET', meta, 'publishedAt', 'deleted')
if not st[1] or st[2] == '1' then return { -1 } end
if redis.call('SISMEMBER', evicted, id) == 1 then return { -5 } end
if dir == 'd' and allow ~= '1' then return { -2 } end
local published = tonumber(st[1])
if now - published >= window then
  redis.call('DEL', voted)
  return { -3 }
end
if redis.call('SADD', voted, user) == 0 then return { -4 } end
redis.call('EXPIRE', voted, published + window - now)
redis.call('HINCRBY', counters, (dir == 'd') and 'downs' or 'ups', 1)
local c = redis.call('HMGET', counters, 'ups', 'downs')
local ups, downs = tonumber(c[1] or '0'), tonumber(c[2] or '0')
redis.call('ZADD', vtime, published, id)
redis.call('ZADD', vscore, published + per * (ups - downs), id)
local seq = redis.call('INCR', cseq)
redis.call('ZADD', changes, seq, id)
redis.call('SADD', dirty, id)
op_done(meta)
return { ups, downs, published }
