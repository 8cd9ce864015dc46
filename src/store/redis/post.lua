-- hotrank: seed 003 posting. The id comes from the `article:` counter
-- (skipping ids taken otherwise), the poster's up-vote is recorded in
-- voted:<id> (expiring when voting closes) and counted (ups 1, score
-- publishedAt + one vote's score, as the seed's post_article), and the
-- seed's time: and score: sorted sets get the article.
--
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: prefix, publishedAt (now), poster (hex), voting window (s), request
-- id (32 hex digits), score per vote, then field/value pairs of the
-- metadata. A call re-sent
-- with the same request id (a reply lost with its connection) returns the
-- first call's id and creates nothing. Returns the new id, or '' if the
-- caller declared KEYS and the id is not among the candidates it declared
-- (its `meta:article:<id>`, `voted:<id>` and `counter:article:<id>`):
-- nothing is written then, and
-- the caller tries again with the next candidates.
local P, published, poster, window = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local per = tonumber(ARGV[6])
-- The first field/value pair of the metadata.
local FIRST = 7
local req = K(P .. 'post:req:' .. ARGV[5])
local done = redis.call('GET', req)
if done then return done end
local counter = K(P .. 'article:')
local n = tonumber(redis.call('GET', counter) or '0')
-- A post replayed from the journal (op_journal.lua) gets the id it had;
-- the counter only moves forward.
local high = n
if OP_AT ~= '' then n = tonumber(OP_AT) - 1 end
local id
repeat
  n = n + 1
  id = tostring(n)
  if DECLARED and not DECLARED[AK(P, id) .. 'meta:article:' .. id] then return '' end
until redis.call('EXISTS', K(AK(P, id) .. 'meta:article:' .. id)) == 0
-- (post_make.lua, then post_end.lua, follow.)
