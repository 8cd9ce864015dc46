-- hotrank pipeline: an API node journals a request's raw entries on the
-- journal's Redis (docs/design.md, "Disaster recovery"), all or none,
-- after pipe_append.lua queued them and before it answers 202.
--
-- ARGV[1..3]: the journal's epoch key, the epoch of the node, number of
-- partitions m. Then per partition: journal stream, number of entries c,
-- then 14 values per entry: the raw entry's id and its 13 values (as
-- pipe_append.lua wrote them).
--
-- Returns the number of entries journaled, or the error EPOCH (nothing
-- journaled) when the journal belongs to another epoch.
local NAMES = { 'x', 'n', 'k', 'a', 'v', 'b', 'i', 't', 'c', 'r', 'e', 's', 'o', 'u' }
local F = #NAMES
local m = tonumber(ARGV[3])
if not m then return redis.error_reply('ERR pipe_journal.lua: malformed header') end
if redis.call('GET', ARGV[1]) ~= ARGV[2] then
  return redis.error_reply('EPOCH the journal does not hold pipeline epoch ' .. ARGV[2])
end
local parts, pos = {}, 4
for j = 1, m do
  local c = tonumber(ARGV[pos + 1])
  if not c or pos + 1 + c * F > #ARGV then
    return redis.error_reply('ERR pipe_journal.lua: malformed partition ' .. j)
  end
  parts[j] = { key = ARGV[pos], c = c, at = pos + 2 }
  pos = pos + 2 + c * F
end
if pos ~= #ARGV + 1 then return redis.error_reply('ERR pipe_journal.lua: malformed arguments') end
local n = 0
for _, p in ipairs(parts) do
  for i = 0, p.c - 1 do
    local args = { 'XADD', p.key, '*' }
    for f = 1, F do
      args[#args + 1] = NAMES[f]
      args[#args + 1] = ARGV[p.at + i * F + f - 1]
    end
    redis.call(unpack(args))
    n = n + 1
  end
end
return n
