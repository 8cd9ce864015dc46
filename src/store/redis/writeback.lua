-- hotrank: writes exact scores back into a ranking as its new bounds.
--
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: the shard's prefix (its change log and ranking index; the site's
-- prefix when it has one shard), ranking key, state key, seq the scores were computed at,
-- now, mode ('r' rebuild, 'i' incremental), TTL (s, 0: none), most live
-- rankings, default ranking key, then pairs (article id, score or '-' to
-- remove).
--
-- A rebuilt ranking that would make more than the most live rankings drops
-- the least recently used others (their state's `now` is their last use),
-- never the default ranking (seed 000's `hot:score`).
--
-- A score is written only if the article has not changed after `seq`
-- (another node's newer events would make it too low); such articles stay
-- newer than the ranking's seq, so the next query re-scores them.
local P, zkey, skey = ARGV[1], ARGV[2], ARGV[3]
local seq, now, mode, ttl = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6], tonumber(ARGV[7])
local maxlive, default = tonumber(ARGV[8]), ARGV[9]
local changes = K(P .. 'changes')
local index = K(P .. 'hot:index')
K(zkey)
K(skey)
if mode == 'r' then
  redis.call('DEL', zkey)
  redis.call('HSET', skey, 'seq', seq, 'now', now)
  local others = {}
  for _, name in ipairs(redis.call('SMEMBERS', index)) do
    -- Only rankings the caller declared (it read the index just before).
    if name ~= zkey and name ~= default and (not DECLARED or DECLARED[name]) then
      local used = tonumber(redis.call('HGET', name .. ':state', 'now') or '0')
      others[#others + 1] = { name, used }
    end
  end
  table.sort(others, function(a, b) return a[2] < b[2] end)
  -- This ranking and the default one count toward the cap.
  local over = #others + 2 - maxlive
  for i = 1, over do
    redis.call('DEL', others[i][1], others[i][1] .. ':state')
    redis.call('SREM', index, others[i][1])
  end
else
  local st = redis.call('HMGET', skey, 'seq', 'now')
  if not st[1] then return 0 end
  if tonumber(st[1]) > seq then seq = tonumber(st[1]) end
  local n = tonumber(st[2] or '0')
  if n < now then n = now end
  redis.call('HSET', skey, 'seq', seq, 'now', n)
  seq = tonumber(ARGV[4])
end
for i = 10, #ARGV, 2 do
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
redis.call('SADD', index, zkey)
return 1
