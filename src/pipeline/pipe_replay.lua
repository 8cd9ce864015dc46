-- hotrank pipeline: the head of the replay script (docs/design.md,
-- "Disaster recovery"). The script is event.lua, pipe_gate_args.lua, this
-- head, common.lua,
-- gate.lua, pipe_replay_apply.lua and apply.lua: one call gates a batch of
-- journaled raw entries, in raw entry id order, to rebuild the gate's
-- state, and applies those whose effects the archived articles do not
-- include.
--
-- ARGV[1..12]: prefix, dedupe window (s), visitor limit, ip limit,
-- eventId TTL (s), hourly keep (s), daily keep (s), require_known (0/1),
-- max articles, behaviour limit, behaviour quarantine (ms), number of
-- entries. Then 16 per entry: its raw entry id (`x`: it arrived at that
-- id's time, as the filter stage took it), what to do with it ('i': its article's
-- archived counts include it, gate it only; '': gate and apply it; a
-- verdict code: gate it and apply that verdict, the one the gate gave it
-- before the disaster), the same for the archived store totals, the API
-- node's `now` (s), and the 12 event fields of ingest.lua.
--
-- Returns { entries applied, entries counted }.
-- (No read before the gate: gate.lua reads existence itself.)
local GIVEN = nil
-- Journaled entries are gated on their own times (`at`, and the head's
-- `now` for the gate's slots), not on the gate clock.
local GATE_TIME = false
local n = tonumber(ARGV[12])
local H, F = 12, 16
if not (gate_args_ok and n) or #ARGV ~= H + n * F or n == 0 then
  return redis.error_reply('ERR pipe_replay.lua: malformed header')
end
local now = 0
local ev = {}
for i = 1, n do
  local b = H + (i - 1) * F + 1
  local t = tonumber(ARGV[b + 3])
  local e = parse_event(ARGV, b + 3)
  if not (e and t) then
    return redis.error_reply('ERR pipe_replay.lua: malformed entry ' .. i)
  end
  e.at = tonumber(string.match(ARGV[b], '^(%d+)%-'))
  e.included = ARGV[b + 1] == 'i'
  e.decided = tonumber(ARGV[b + 1])
  e.t_included = ARGV[b + 2] == 'i'
  e.t_decided = tonumber(ARGV[b + 2])
  ev[#ev + 1] = e
  if t > now then now = t end
end
