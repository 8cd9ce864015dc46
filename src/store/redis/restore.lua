-- hotrank archive: put one evicted article back from its archived record
-- (docs/design.md, "Eviction and restore"), as seed 002's Abacus SETs a
-- sketch it loaded from Cassandra before it adds to it.
--
-- KEYS: archive:evicted, archive:written, then every key the writes touch.
-- ARGV: article id, now (data time), then the writes, each as: number of
-- arguments after the command name, the name (SET, HSET, EXPIRE, SADD or
-- ZADD), its key, its other arguments.
--
-- Atomic: only while the tombstone is set, all the writes and the
-- tombstone's removal happen in one call; a second restore of the same
-- article (another node, a retry) finds no tombstone and writes nothing.
-- Ingest and votes refuse a tombstoned article without writing, so no
-- event lands between eviction and restore. The article's idle clock
-- (archive:written) starts again at `now`. Returns 1 restored, 0 not
-- evicted.
local evicted, written = K(KEYS[1]), K(KEYS[2])
local id, now = ARGV[1], tonumber(ARGV[2])
local OK = { SET = true, HSET = true, EXPIRE = true, SADD = true, ZADD = true }
local i = 3
while i <= #ARGV do
  local argc = tonumber(ARGV[i])
  if not (argc and argc >= 1 and OK[ARGV[i + 1]]) or i + 1 + argc > #ARGV then
    return redis.error_reply('ERR restore.lua: malformed write at ' .. i)
  end
  K(ARGV[i + 2])
  i = i + 2 + argc
end
if not now then return redis.error_reply('ERR restore.lua: malformed now') end
if redis.call('SISMEMBER', evicted, id) == 0 then return 0 end
i = 3
while i <= #ARGV do
  local argc = tonumber(ARGV[i])
  redis.call(ARGV[i + 1], unpack(ARGV, i + 2, i + 1 + argc))
  i = i + 2 + argc
end
redis.call('SREM', evicted, id)
redis.call('ZADD', written, now, id)
return 1
