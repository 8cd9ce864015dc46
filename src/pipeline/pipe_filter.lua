-- hotrank pipeline: the filter worker's head (docs/design.md, "Pipeline").
-- The script is event.lua, pipe_undone.lua, pipe_gate_args.lua, this
-- head, common.lua,
-- gate.lua, pipe_flag.lua and pipe_ack.lua: one atomic call gates a batch
-- of raw entries, writes each with its verdict to the flagged stream and
-- acknowledges it.
--
-- ARGV[1..15]: prefix, dedupe window (s), visitor limit, ip limit, eventId
-- TTL (s), hourly keep (s), daily keep (s), require_known (0/1), max
-- articles, behaviour limit, behaviour quarantine (ms), raw stream,
-- flagged stream, group, number of entries. Then 14 per entry: its id,
-- the API node's `now` (s), and the 12 event fields of ingest.lua.
--
-- Effectively once: an entry that is no longer pending in the group was
-- decided (its verdict, gate state and flagged entry were written by the
-- call that acknowledged it), so it is skipped. A worker killed before
-- its call leaves the entry pending for XAUTOCLAIM; one killed after it
-- finds nothing to redo.
--
-- Returns { entries decided, entries skipped }.
-- (No read before the gate: gate.lua reads existence itself.)
local GIVEN = nil
local GATE_TIME = true
local SRC, DST, GROUP = ARGV[12], ARGV[13], ARGV[14]
local n = tonumber(ARGV[15])
local H, F = 15, 14
if not (gate_args_ok and n) or #ARGV ~= H + n * F then
  return redis.error_reply('ERR pipe_filter.lua: malformed header')
end
pending_among(SRC, GROUP, ARGV, H + 1, F, n)

local now = 0
local ev, acks, seen = {}, {}, {}
local skipped = 0
for i = 1, n do
  local b = H + (i - 1) * F
  local id, t = ARGV[b + 1], tonumber(ARGV[b + 2])
  local e = parse_event(ARGV, b + 2)
  if not (e and t) then
    return redis.error_reply('ERR pipe_filter.lua: malformed entry ' .. i)
  end
  if undone(SRC, GROUP, id, seen) then
    e.id = id
    -- Arrived when the raw entry was appended: its id's time (Redis's
    -- clock, which XADD never lets run backward in a stream).
    e.at = tonumber(string.match(id, '^(%d+)%-'))
    ev[#ev + 1] = e
    acks[#acks + 1] = id
    if t > now then now = t end
  else
    skipped = skipped + 1
  end
end
if #ev == 0 then return { 0, skipped } end
