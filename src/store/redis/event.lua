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
local KINDS = { v = true, d = true, l = true, c = true, f = true, s = true }
local function parse_event(A, b)
  local e = {
    kind = A[b + 1], art = A[b + 2], vh = A[b + 3], vb = A[b + 4],
    iph = A[b + 5], ts = tonumber(A[b + 6]), clock = tonumber(A[b + 7]),
    arrival = tonumber(A[b + 8]), eid = A[b + 9], secs = tonumber(A[b + 10]),
    bot = A[b + 11] ~= '0', fam = A[b + 11], trusted = A[b + 12] == '1',
    tss = A[b + 6], clocks = A[b + 7], arrs = A[b + 8],
  }
  if not (KINDS[e.kind] and e.ts and e.clock and e.arrival and e.secs)
      or e.art == '' or e.vh == '' or e.iph == '' then
    return nil
  end
  e.net = ''
  if #e.iph > 16 then
    e.net = string.sub(e.iph, 17)
    e.iph = string.sub(e.iph, 1, 16)
  end
  e.hour = math.floor(e.ts / 3600)
  e.day = math.floor(e.ts / 86400)
  return e
end
