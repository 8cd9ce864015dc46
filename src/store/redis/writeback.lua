-- hotrank: writes exact scores back into a ranking as its new bounds.
--
-- ARGV: prefix, ranking key, state key, seq the scores were computed at,
-- now, mode ('r' rebuild, 'i' incremental), TTL (s, 0: none), then pairs
-- (article id, score or '-' to remove).
--
-- A score is written only if the article has not changed after `seq`
-- (another node's newer events would make it too low); such articles stay
-- newer than the ranking's seq, so the next query re-scores them.
local P, zkey, skey = ARGV[1], ARGV[2], ARGV[3]
local seq, now, mode, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local changes = P .. 'changes'
if mode == 'r' then
  redis.call('DEL', zkey)
  redis.call('HSET', skey, 'seq', seq, 'now', now)
else
  local st = redis.call('HMGET', skey, 'seq', 'now')
  if not st[1] then return 0 end
  if tonumber(st[1]) > seq then seq = tonumber(st[1]) end
  local n = tonumber(st[2] or '0')
  if n < now then n = now end
  redis.call('HSET', skey, 'seq', seq, 'now', n)
  seq = tonumber(ARGV[4])
end
for i = 8, #ARGV, 2 do
  local id, score = ARGV[i], ARGV[i + 1]
  local c = redis.call('ZSCORE', changes, id)
  if not c or tonumber(c) <= seq then
    if score == '-' then
      redis.call('ZREM', zkey, id)
    else
      redis.call('ZADD', zkey, score, id)
    end
  end
end
if ttl > 0 then
  redis.call('EXPIRE', zkey, ttl)
  redis.call('EXPIRE', skey, ttl)
end
redis.call('SADD', P .. 'hot:index', zkey)
return 1
