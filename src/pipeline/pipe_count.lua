-- hotrank pipeline: the count worker's head (docs/design.md, "Pipeline").
-- The script is pipe_undone.lua, this head, common.lua, apply.lua and
-- pipe_ack.lua: one atomic call applies a batch of flagged entries to the
-- counters, buckets, sketches, change log and quarantine tallies, and
-- acknowledges them.
--
-- ARGV[1..6]: prefix, hourly keep (s), daily keep (s), flagged stream,
-- group, number of entries. Then 12 per entry: its id and the fields
-- pipe_flag.lua wrote (verdict, kind, article, visitor bytes, ts, dwell
-- seconds, tally, now, raw entry id, crawler family, network block).
--
-- Effectively once as in pipe_filter.lua: an entry no longer pending in
-- the group was applied by the call that acknowledged it, and is skipped.
--
-- Returns { entries applied, entries skipped }.
local P = ARGV[1]
local hkeep = tonumber(ARGV[2])
local dkeep = tonumber(ARGV[3])
local SRC, GROUP = ARGV[4], ARGV[5]
local n = tonumber(ARGV[6])
local H, F = 6, 12
if not (hkeep and dkeep and n) or #ARGV ~= H + n * F then
  return redis.error_reply('ERR pipe_count.lua: malformed header')
end
pending_among(SRC, GROUP, ARGV, H + 1, F, n)

local now = 0
local ev, verdicts, acks, seen = {}, {}, {}, {}
local counted, skipped = 0, 0
for i = 1, n do
  local b = H + (i - 1) * F
  local id, v, ts, secs, t = ARGV[b + 1], tonumber(ARGV[b + 2]), tonumber(ARGV[b + 6]),
    tonumber(ARGV[b + 7]), tonumber(ARGV[b + 9])
  if not (v and ts and secs and t) or ARGV[b + 4] == '' then
    return redis.error_reply('ERR pipe_count.lua: malformed entry ' .. i)
  end
  if undone(SRC, GROUP, id, seen) then
    ev[#ev + 1] = {
      kind = ARGV[b + 3], art = ARGV[b + 4], vb = ARGV[b + 5], ts = ts, secs = secs,
      tally = ARGV[b + 8] == '1', fam = ARGV[b + 11], net = ARGV[b + 12], hour = math.floor(ts / 3600), day = math.floor(ts / 86400),
    }
    verdicts[#verdicts + 1] = v
    acks[#acks + 1] = id
    if v == 0 then counted = counted + 1 end
    if t > now then now = t end
  else
    skipped = skipped + 1
  end
end
if #ev == 0 then return { 0, skipped } end
