-- hotrank: one event from the 12 arguments after A[b] (ingest.lua's
-- layout: kind, article id, visitor hex, visitor bytes, ip hex, ts, rate
-- clock (ms), arrival (s), eventId hex or '', dwell seconds, bot ('0', or
-- its crawler family's name, src/crawler.rs; '1' from older nodes), trusted),
-- with its hour and day; nil when malformed. The ip field is the ip key's
-- 16 hex digits, followed by the network block's 16 (`net`, the review's
-- evidence) when known: `e.iph` is the key, `e.net` the block or '' (so
-- raw entries of older builds read as unknown). `tss`, `clocks` and
-- `arrs` keep ts, clock and arrival as sent: values written back to Redis go as
-- these strings (a Lua number passed to redis.call or concatenated is a
-- floating-point sprintf each time).
-- The globals the per-event code of this script and the chunks after it
-- (gate.lua, apply.lua, ...) use, as locals: a global is a table lookup
-- each time it is named, a local (or upvalue) is not.
local tonumber, tostring, ipairs, pairs, unpack = tonumber, tostring, ipairs, pairs, unpack
local string, math, table, redis = string, math, table, redis
local KINDS = { v = true, d = true, l = true, c = true, f = true, s = true }
-- (Every field the event gets, here and in gate.lua, is named in the
-- constructor, so that its table is sized once: a field added later
-- would grow it, rehashing every field, per event.)
local function parse_event(A, b)
  local tss, clocks, arrs, secs, fam = A[b + 6], A[b + 7], A[b + 8], A[b + 10], A[b + 11]
  local ts = tonumber(tss)
  if not ts then return nil end
  local e = {
    kind = A[b + 1], art = A[b + 2], vh = A[b + 3], vb = A[b + 4],
    iph = A[b + 5], ts = ts, clock = tonumber(clocks),
    arrival = tonumber(arrs), eid = A[b + 9], secs = secs == '0' and 0 or tonumber(secs),
    bot = fam ~= '0', fam = fam, trusted = A[b + 12] == '1',
    tss = tss, clocks = clocks, arrs = arrs,
    net = '', hour = math.floor(ts / 3600), day = math.floor(ts / 86400),
    efield = false, ifield = false, vfield = false, dkey = false, tally = false,
  }
  if not (KINDS[e.kind] and e.clock and e.arrival and e.secs)
      or e.art == '' or e.vh == '' or e.iph == '' then
    return nil
  end
  if #e.iph > 16 then
    e.net = string.sub(e.iph, 17)
    e.iph = string.sub(e.iph, 1, 16)
  end
  return e
end
