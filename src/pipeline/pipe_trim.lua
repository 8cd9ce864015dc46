-- hotrank pipeline: trims a stream to what its group has not yet
-- acknowledged (docs/design.md, "Pipeline"). Entries before the group's
-- oldest pending entry, or before its last delivered entry when nothing
-- is pending, were acknowledged: XTRIM MINID drops them.
--
-- Callers waiting for verdicts (`PipelineStore::ingest`) read them back
-- from a flagged stream after a mark they register first in the zset
-- ARGV[3] (member `<token> <mark>`, score = their deadline in ms): nothing
-- after the oldest live mark is trimmed, and expired waiters are dropped.
--
-- ARGV: stream, group, waiters zset ('' for none). Returns the number of
-- entries dropped.
local key, group, waiters = ARGV[1], ARGV[2], ARGV[3]
local last = last_delivered(key, group)
if not last or last == '0-0' then return 0 end
local p = redis.call('XPENDING', key, group)
local minid = last
if tonumber(p[1]) > 0 then minid = p[2] end
if waiters and waiters ~= '' then
  local t = redis.call('TIME')
  local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZREMRANGEBYSCORE', waiters, '-inf', now_ms)
  for _, m in ipairs(redis.call('ZRANGE', waiters, 0, -1)) do
    local mark = string.match(m, ' (.+)$')
    if mark and id_lt(mark, minid) then minid = mark end
  end
end
return redis.call('XTRIM', key, 'MINID', minid)
