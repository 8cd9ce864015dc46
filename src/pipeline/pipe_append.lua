-- hotrank pipeline: an API node appends a request's events to the raw
-- streams of their partitions, all or none (docs/design.md, "Pipeline").
--
-- ARGV[1..4]: the backlog bound (entries a partition's raw and flagged
-- streams hold at most), the epoch key, the epoch this node journals
-- under ('' when it keeps no journal), number of partitions m. Then per
-- partition: raw
-- stream, flagged stream, number of entries c, then 13 values per entry
-- (now, then ingest.lua's 12 event fields).
--
-- Returns the ids of the entries appended (partition by partition, in
-- the order given), or the error BACKLOG (nothing appended) when a
-- partition would pass the bound, or EPOCH (nothing appended) when Redis
-- does not hold the node's epoch: it lost its data, and only a restore
-- from the archive and the journal may set it again (docs/design.md,
-- "Disaster recovery").
local bound = tonumber(ARGV[1])
local epoch = ARGV[3]
local m = tonumber(ARGV[4])
local NAMES = { 'n', 'k', 'a', 'v', 'b', 'i', 't', 'c', 'r', 'e', 's', 'o', 'u' }
local F = #NAMES
if not (bound and m) then return redis.error_reply('ERR pipe_append.lua: malformed header') end
local refused = epoch_refusal(ARGV[2], epoch)
if refused then return refused end
local parts, pos = {}, 5
for j = 1, m do
  local c = tonumber(ARGV[pos + 2])
  if not c or pos + 2 + c * F > #ARGV then
    return redis.error_reply('ERR pipe_append.lua: malformed partition ' .. j)
  end
  parts[j] = { raw = ARGV[pos], flagged = ARGV[pos + 1], c = c, at = pos + 3 }
  pos = pos + 3 + c * F
end
if pos ~= #ARGV + 1 then return redis.error_reply('ERR pipe_append.lua: malformed arguments') end
for _, p in ipairs(parts) do
  if redis.call('XLEN', p.raw) + redis.call('XLEN', p.flagged) + p.c > bound then
    return redis.error_reply('BACKLOG the pipeline holds ' .. bound .. ' entries in a partition')
  end
end
local ids = {}
for _, p in ipairs(parts) do
  for i = 0, p.c - 1 do
    local args = { 'XADD', p.raw, '*' }
    for f = 1, F do
      args[#args + 1] = NAMES[f]
      args[#args + 1] = ARGV[p.at + i * F + f - 1]
    end
    ids[#ids + 1] = redis.call(unpack(args))
  end
end
return ids
