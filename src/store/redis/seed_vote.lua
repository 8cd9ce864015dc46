-- hotrank, seed layout: a seed 003 vote as the seed's article_vote casts
-- it: the publication time from `ZSCORE time: article:<id>` (the site's
-- code writes `time.time()`, seconds with a fraction), closed once it is
-- below `now - window` (the seed's cutoff: open a window to the second
-- too), `SADD voted:<id> user:<id>` (one vote per user, whichever side
-- cast the other), `ZINCRBY score:` and `HINCRBY article:<id> votes`.
-- An article hotrank knows but nobody posted (PUT, events) joins the
-- seed's keys on its first vote. Up-votes only (the seed has no others).
-- hotrank's counters, change log and archive:dirty are written beside.
--
-- ARGV: prefix, id, voter member, now, window (s), score per vote.
-- Returns {votes, score} (score as text), or {-1} unknown/deleted,
-- {-3} voting closed, {-4} already voted.
local P, id, user = ARGV[1], ARGV[2], ARGV[3]
local now, window, per = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local member = 'article:' .. id
local meta, article = K(P .. 'meta:article:' .. id), K(P .. member)
local vtime, vscore = K(P .. 'time:'), K(P .. 'score:')
local voted = K(P .. 'voted:' .. id)
local st = redis.call('HMGET', meta, 'publishedAt', 'deleted', 'title', 'url', 'author')
if st[2] == '1' then return { -1 } end
local published = redis.call('ZSCORE', vtime, member)
if not published then
  if not st[1] then return { -1 } end
  published = st[1]
  redis.call('HSET', article, 'title', st[3] or '', 'link', st[4] or '',
    'poster', st[5] or '', 'time', published)
  redis.call('HSETNX', article, 'votes', 0)
  redis.call('ZADD', vtime, published, member)
  redis.call('ZADD', vscore, published, member)
end
published = tonumber(published)
if published < now - window then
  redis.call('DEL', voted)
  return { -3 }
end
if redis.call('SADD', voted, user) == 0 then return { -4 } end
-- Kept (whole seconds) until voting has closed.
redis.call('EXPIRE', voted, math.floor(published + window - now) + 1)
local score = redis.call('ZINCRBY', vscore, per, member)
local votes = redis.call('HINCRBY', article, 'votes', 1)
redis.call('HINCRBY', K(P .. 'counter:article:' .. id), 'ups', 1)
local seq = redis.call('INCR', K(P .. 'changes:seq'))
redis.call('ZADD', K(P .. 'changes'), seq, id)
redis.call('SADD', K(P .. 'archive:dirty'), id)
return { votes, score }
