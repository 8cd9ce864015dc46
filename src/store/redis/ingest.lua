-- hotrank: gate and count a batch of events atomically (docs/redis-keys.md).
--
-- The script is event.lua, this head (arguments, events, key check), then
-- common.lua, gate.lua (read, decide, gate-state writes), apply.lua
-- (counters) and reply.lua, concatenated when the store loads it.
--
-- KEYS: none (one Redis), or on a cluster every key the batch may touch
-- (declared.lua checks the names).
-- ARGV[1..15]: prefix, now, dedupe window (s), visitor limit, ip limit,
-- eventId TTL (s), hourly keep (s), daily keep (s), with_counts (0/1),
-- require_known (0/1), max articles (0: none), behaviour limit (distinct
-- articles a minute, 0: off), behaviour quarantine (ms), batch id ('' =
-- none), number of events. Then 12 fields per event: kind (v d l c f s),
-- article id, visitor hex, visitor bytes (the 16 bytes added to UV
-- sketches), ip hex (with the network block's hex after it when known,
-- event.lua), ts, rate clock (ms), arrival (s), eventId hex or '',
-- dwell seconds, bot (0/1), trusted (0/1).
--
-- Returns 3 integers per event: verdict (0 counted, 1 duplicate,
-- 2 rate_limited, 3 bot, 4 replayed, 5 refused: unknown article, 6 refused:
-- max articles, 7 bot: visitor quarantined by behaviour, 8 bot: this view
-- quarantined its visitor), then lifetime PV and UV when with_counts is 1
-- (else 0 0).
--
-- All or nothing: the script checks its arguments and reads every piece of
-- state it needs (two HMGETs per gate family, one ZMSCORE for the
-- articles) before its first write, decides every verdict in Lua, then
-- writes. A batch id makes a retried call return the first call's answer
-- without applying anything again.
--
-- Gate state (but the dedupe pairs) lives in time-slotted hashes,
-- `gate:<family>:<slot>` with slot = floor(gate clock / S) (the site's
-- clock, gate_clock.lua, not the node's): a field written during slot k is read during
-- slots k and k + 1 (the newer slot wins), and the hash expires when slot
-- k + 1 ends, so every entry stays readable for at least S. One HMGET per
-- slot reads a whole batch's entries and one HSET writes them, instead of
-- a key (and a command) per event.
--
-- The order of checks is the embedded store's: replayed, bot (user agent
-- or quarantined visitor), rate_limited, duplicate, bot (behaviour),
-- counted. Only a counted event leaves its eventId behind.
local P = ARGV[1]
local now = tonumber(ARGV[2])
-- Arrival is on the site's gate clock (gate.lua), not the node's `now`.
local GATE_TIME = true
local window = tonumber(ARGV[3])
local vlimit = tonumber(ARGV[4])
local iplimit = tonumber(ARGV[5])
local eid_ttl = tonumber(ARGV[6])
local hkeep = tonumber(ARGV[7])
local dkeep = tonumber(ARGV[8])
local with_counts = ARGV[9] == '1'
local require_known = ARGV[10] == '1'
local max_articles = tonumber(ARGV[11])
local bot_n = tonumber(ARGV[12])
local bot_ms = tonumber(ARGV[13])
local batch_id = ARGV[14]
local n = tonumber(ARGV[15])
local H = 15
local F = 12
-- Over a split site's gate stage (GATE_STAGE, set by the chunk in front:
-- gate_stage.lua follows gate.lua and totals.lua instead of the counters),
-- the events are followed by what a read of the shards saw: the number
-- of copies of `stats:articles` summed (for max_articles), the number of
-- articles m, then m times (id, exists 0/1, known 0/1). gate.lua takes
-- existence from there (`GIVEN`) instead of the shards' keys.
local GIVEN = nil
local tail = 0
if GATE_STAGE and n then
  local m = tonumber(ARGV[H + n * F + 2])
  if m then
    GIVEN = { count = tonumber(ARGV[H + n * F + 1]), arts = {} }
    for j = 0, m - 1 do
      local b = H + n * F + 2 + 3 * j
      GIVEN.arts[ARGV[b + 1]] = { exists = ARGV[b + 2] == '1', known = ARGV[b + 3] == '1' }
    end
    tail = 2 + 3 * m
  end
end

if not (now and window and vlimit and iplimit and eid_ttl and hkeep and dkeep
    and max_articles and bot_n and bot_ms and n) or #ARGV ~= H + n * F + tail
    or (GATE_STAGE and not (GIVEN and GIVEN.count and batch_id ~= '')) then
  return redis.error_reply('ERR ingest.lua: malformed header')
end

local batch_key = batch_id ~= '' and (K(P .. 'gate:batch:' .. batch_id)) or nil
local BATCH_TTL = 120

-- A retried batch: the first call's answer, nothing applied again.
if batch_key then
  local done = redis.call('GET', batch_key)
  if done and GATE_STAGE then return gate_stage_recorded(done, P, batch_id) end
  if done then
    local out = {}
    for v in string.gmatch(done, '[^,]+') do out[#out + 1] = tonumber(v) end
    return out
  end
end

-- Parse and check every event before reading or writing anything.
local ev = {}
for i = 1, n do
  local e = parse_event(ARGV, H + (i - 1) * F)
  if not e then
    return redis.error_reply('ERR ingest.lua: malformed event ' .. i)
  end
  ev[i] = e
end

-- With declared keys (a cluster), every name the batch may write is
-- checked before anything is read or written (dedupe keys and gate slots
-- are checked where they are named, also before the first write).
if DECLARED and not GATE_STAGE then
  for _, name in ipairs({ 'clock', 'stats:counted', 'stats:quarantine' }) do
    K(P .. name)
  end
  for k = 0, (SPLIT and NSHARDS or 1) - 1 do
    for _, name in ipairs({ 'archive:dirty', 'archive:evicted', 'stats:articles' }) do
      K(LK(P, k) .. name)
    end
  end
  for _, e in ipairs(ev) do
    local a, h, d = e.art, e.hour, e.day
    local S, A = SK(P, a), AK(P, a)
    K(S .. 'changes:seq')
    K(S .. 'changes')
    K(S .. 'articles:new')
    K(S .. 'active:h:' .. h)
    K(S .. 'active:d:' .. d)
    K(A .. 'counter:views:' .. a)
    K(A .. 'hll:uv:' .. a)
    K(A .. 'counter:article:' .. a)
    K(A .. 'meta:article:' .. a)
    K(A .. 'bucket:h:' .. a .. ':' .. h)
    K(A .. 'hll:uv:h:' .. a .. ':' .. h)
    if e.net ~= '' then
      K(A .. 'hll:net:h:' .. a .. ':' .. h)
      K(A .. 'hll:netuv:h:' .. a .. ':' .. h)
    end
    K(A .. 'bucket:d:' .. a .. ':' .. d)
    K(A .. 'hll:uv:d:' .. a .. ':' .. d)
    K(P .. 'stats:quarantine:h:' .. h)
  end
end

