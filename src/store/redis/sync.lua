-- hotrank: what changed since a ranking (or this node) last looked.
--
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: the site's `clock` key ('' when the caller reads it itself: a
-- site over several cluster slots), the shard's prefix (its change log;
-- the site's when it has one shard), ranking state key, this node's last
-- seq of the shard, max entries.
-- Returns {seq, floor, ranking seq (-1: none), ranking now (-1: none),
-- truncated (0/1), clock, id1, seq1, id2, seq2, ...}: the change log
-- entries with seq in (min(node seq, ranking seq), seq]; `clock` is the
-- newest arrival time any ingest call carried (queries never run before
-- it; -1 when not read here).
local CLOCK, S = ARGV[1], ARGV[2]
local seq = tonumber(redis.call('GET', K(S .. 'changes:seq')) or '0')
local floor = tonumber(redis.call('GET', K(S .. 'changes:floor')) or '0')
local st = redis.call('HMGET', K(ARGV[3]), 'seq', 'now')
local rseq, rnow = -1, -1
local from = tonumber(ARGV[4])
if st[1] and st[2] then
  rseq = tonumber(st[1])
  rnow = tonumber(st[2])
  if rseq < from then from = rseq end
end
if from < floor then from = floor end
local max = tonumber(ARGV[5])
local clock = -1
if CLOCK ~= '' then clock = tonumber(redis.call('GET', K(CLOCK)) or '0') end
local out = { seq, floor, rseq, rnow, 0, clock }
local d = redis.call('ZRANGEBYSCORE', K(S .. 'changes'), '(' .. from, seq, 'WITHSCORES', 'LIMIT', 0, max + 1)
if #d > 2 * max then
  out[5] = 1
  return out
end
for i = 1, #d do out[#out + 1] = d[i] end
return out
