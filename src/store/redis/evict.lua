-- hotrank archive: drop a batch of idle, archived articles from Redis
-- (docs/design.md, "Eviction and restore"). Runs in the archive writer's
-- round, under archive:lock, right after the writer wrote each article's
-- whole state (daily buckets included) to the archive.
--
-- KEYS: archive:dirty, archive:taking, archive:written, archive:evicted,
-- then the keys of each article in turn (what the archive now holds).
-- ARGV: cutoff (data time, Unix s), number of articles, then per article
-- its id and how many of the KEYS are its own.
--
-- An article goes only if, now, nothing changed it since its state was
-- archived (not in archive:dirty nor archive:taking: every change script
-- adds it to dirty in the same call), it is not evicted already, and
-- archive:written still dates it at or before the cutoff. Then its keys
-- go, it leaves archive:written and its tombstone is set in
-- archive:evicted. Its meta hash and its articles:new entry stay.
-- Returns the evicted ids.
local dirty, taking, written, evicted = K(KEYS[1]), K(KEYS[2]), K(KEYS[3]), K(KEYS[4])
local cutoff, n = tonumber(ARGV[1]), tonumber(ARGV[2])
if not (cutoff and n) or #ARGV ~= 2 + 2 * n then
  return redis.error_reply('ERR evict.lua: malformed arguments')
end
local out = {}
local k = 5
for i = 1, n do
  local id, nk = ARGV[1 + 2 * i], tonumber(ARGV[2 + 2 * i])
  local at = redis.call('ZSCORE', written, id)
  if at and tonumber(at) <= cutoff
      and redis.call('SISMEMBER', dirty, id) == 0
      and redis.call('SISMEMBER', taking, id) == 0
      and redis.call('SISMEMBER', evicted, id) == 0 then
    for j = k, k + nk - 1, 500 do
      redis.call('UNLINK', unpack(KEYS, j, math.min(j + 499, k + nk - 1)))
    end
    redis.call('ZREM', written, id)
    redis.call('SADD', evicted, id)
    out[#out + 1] = id
  end
  k = k + nk
end
return out
