-- hotrank: writes exact scores back into a ranking as its new bounds.
--
-- KEYS: every key it touches (declared.lua checks the names).
-- ARGV: the shard's prefix (its change log and ranking index; the site's
-- prefix when it has one shard), ranking key, state key, seq the scores were computed at,
-- now, mode, TTL (s, 0: none), most live rankings, default ranking key,
-- build key ('' none), entries the build key holds (mode 'r' with a build
-- key), then pairs (article id, score or '-' to remove).
--
-- Modes. A query writes back in calls of at most a chunk of pairs each, so
-- no call runs long (rank.rs `CHUNK`):
-- 'i' incremental, the last (or only) call: the pairs, then the state;
-- 'p' an earlier part of an incremental write-back: the pairs only (the
--     state moves on with the last call, so no reader trusts bounds of
--     articles a later part has not written yet);
-- 'r' rebuild, the last (or only) call: the ranking becomes the build key
--     (when earlier parts wrote one; it must hold the entries they added,
--     else a part is gone and nothing is written: -1) plus these pairs;
-- 'b' an earlier part of a rebuild: the pairs go into the build key (a
--     name of its own per rebuild, expiring after 10 minutes if the
--     rebuild is abandoned), never into the ranking readers walk.
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
local build, built = ARGV[10], tonumber(ARGV[11])
local changes = K(P .. 'changes')
local index = K(P .. 'hot:index')
K(zkey)
K(skey)
if build ~= '' then K(build) end
local target = zkey
if mode == 'b' then
  target = build
elseif mode == 'p' then
  if redis.call('EXISTS', skey) == 0 then return 0 end
elseif mode == 'r' then
  if build ~= '' and built > 0 then
    if redis.call('ZCARD', build) ~= built then
      redis.call('DEL', build)
      return -1
    end
    redis.call('RENAME', build, zkey)
    redis.call('PERSIST', zkey)
  else
    redis.call('DEL', zkey)
  end
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
local added = 0
for i = 12, #ARGV, 2 do
  local id, score = ARGV[i], ARGV[i + 1]
  local c = redis.call('ZSCORE', changes, id)
  if not c or tonumber(c) <= seq then
    if score == '-' then
      redis.call('ZREM', target, id)
    else
      added = added + redis.call('ZADD', target, score, id)
    end
  end
end
if mode == 'b' then
  redis.call('EXPIRE', build, 600)
  return added
end
if mode == 'p' then return 1 end
if ttl > 0 then
  redis.call('EXPIRE', zkey, ttl)
  redis.call('EXPIRE', skey, ttl)
end
redis.call('SADD', index, zkey)
return 1
