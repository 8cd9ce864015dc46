-- A lower bound for ingest on one Redis (bench/redis_ingest_costs.sh):
-- the least a gate with hotrank's per-event promises writes, and nothing
-- else. Per event: its dedupe pair as a key of its own (MGET, then SET EX
-- for a new pair) and its visitor's rate entry as a field of a slotted
-- hash (HMGET, HSET). Per article of the batch, all its views at once:
-- lifetime PV (INCRBY) and UV (PFADD), the hour's PV (HINCRBY) and UV
-- (PFADD), and the hour's activity set (one SADD for the batch). No daily
-- buckets, change log, behaviour rule, quarantine, eventIds, totals or
-- retry record.
-- ARGV: prefix, now, n, then per event: article, visitor bytes, ts, clock.
local P, now, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local hour = math.floor(now / 3600)
local pairs_, fields = {}, {}
for i = 1, n do
  local b = 3 + (i - 1) * 4
  pairs_[i] = P .. 'dd:' .. ARGV[b + 1] .. ':' .. ARGV[b + 2]
  fields[i] = ARGV[b + 2]
end
local seen = redis.call('MGET', unpack(pairs_))
local vkey = P .. 'v:' .. math.floor(now / 120)
redis.call('HMGET', vkey, unpack(fields))
local out, rate, groups, order = {}, {}, {}, {}
for i = 1, n do
  local b = 3 + (i - 1) * 4
  if seen[i] then
    out[i] = 1
  else
    out[i] = 0
    redis.call('SET', pairs_[i], ARGV[b + 3], 'EX', 4500)
    rate[#rate + 1] = fields[i]
    rate[#rate + 1] = ARGV[b + 4]
    local a = ARGV[b + 1]
    local g = groups[a]
    if not g then
      g = {}
      groups[a] = g
      order[#order + 1] = a
    end
    g[#g + 1] = ARGV[b + 2]
  end
end
if #rate > 0 then
  redis.call('HSET', vkey, unpack(rate))
  redis.call('EXPIRE', vkey, 240)
end
for _, a in ipairs(order) do
  local g = groups[a]
  redis.call('INCRBY', P .. 'views:' .. a, #g)
  redis.call('PFADD', P .. 'uv:' .. a, unpack(g))
  redis.call('PFADD', P .. 'uv:h:' .. a .. ':' .. hour, unpack(g))
  redis.call('HINCRBY', P .. 'b:h:' .. a .. ':' .. hour, 'pv', #g)
end
if #order > 0 then redis.call('SADD', P .. 'active:h:' .. hour, unpack(order)) end
return out
