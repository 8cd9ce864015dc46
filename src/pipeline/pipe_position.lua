-- hotrank pipeline: where the pipeline stands, as the archive records it
-- with each article (docs/design.md, "Disaster recovery"). Run in the
-- same MULTI/EXEC as the reads of the articles it is recorded with, so
-- that the counts read include exactly the raw entries it says.
--
-- ARGV[1..2]: the most entries in flight it walks (over all partitions),
-- number of partitions m; then per partition its raw and flagged streams.
--
-- Returns per partition { upto, { id, article, verdict, ... } }: upto is
-- the filter group's last delivered raw entry, and the list holds the raw
-- entries up to it whose effects are not applied yet, with their
-- articles: pending in the filter group (verdict ''), or decided and
-- flagged but not yet applied by the count group (with the verdict the
-- gate gave them: a replay applies that one, as the gate decided it in an
-- order the replay does not know). Every other raw entry up to `upto` is
-- applied.
-- Walks every entry in flight (the cost grows with the backlog, and Redis
-- waits meanwhile): past the bound it answers the error FLIGHT instead,
-- having walked at most that many, and the archive writer retries later.
local max = tonumber(ARGV[1])
local walked = 0
local function over(n)
  walked = walked + n
  return walked > max
end
local function field(f, name)
  for i = 1, #f, 2 do
    if f[i] == name then return f[i + 1] end
  end
  return nil
end
-- Appends to `out` a flight triple for entry `e`: `raw` names the field
-- holding the raw id (nil: the entry's own id, undecided).
local function flight_of(e, raw, out)
  out[#out + 1] = raw and field(e[2], raw) or e[1]
  out[#out + 1] = field(e[2], 'a')
  out[#out + 1] = raw and field(e[2], 'v') or ''
end
-- The entries of `key` pending in `group`, appended to `out`.
local function pending(key, group, raw, out)
  if over(tonumber(redis.call('XPENDING', key, group)[1])) then return false end
  for _, p in ipairs(redis.call('XPENDING', key, group, '-', '+', max)) do
    local e = redis.call('XRANGE', key, p[1], p[1])[1]
    if e then flight_of(e, raw, out) end
  end
  return true
end
local FLIGHT = 'FLIGHT more than ' .. tostring(max) .. ' pipeline entries in flight'
local m = tonumber(ARGV[2])
if not (max and m) or #ARGV ~= 2 + 2 * m then
  return redis.error_reply('ERR pipe_position.lua: malformed arguments')
end
local out = {}
for j = 1, m do
  local raw, flagged = ARGV[1 + 2 * j], ARGV[2 + 2 * j]
  local upto = last_delivered(raw, 'filter') or '0-0'
  local flight = {}
  if upto ~= '0-0' then
    if not pending(raw, 'filter', nil, flight) then return redis.error_reply(FLIGHT) end
    local applied = last_delivered(flagged, 'count')
    if applied and not pending(flagged, 'count', 'r', flight) then
      return redis.error_reply(FLIGHT)
    end
    local unread = redis.call('XRANGE', flagged, '(' .. (applied or '0-0'), '+', 'COUNT',
      max - walked + 1)
    if over(#unread) then return redis.error_reply(FLIGHT) end
    for _, e in ipairs(unread) do
      flight_of(e, 'r', flight)
    end
  end
  out[j] = { upto, flight }
end
return out
