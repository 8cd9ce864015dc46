-- hotrank: gate and count a batch of events atomically (docs/redis-keys.md).
--
-- ARGV[1..11]: prefix, now, dedupe window (s), visitor limit, ip limit,
-- eventId TTL (s), hourly keep (s), daily keep (s), with_counts (0/1),
-- require_known (0/1), number of events. Then 11 fields per event: kind
-- (v d l c f s), article id, visitor hex, visitor bytes (the 16 bytes added
-- to UV sketches), ip hex, ts, rate clock (ms), arrival (s), eventId hex
-- or '', dwell seconds, bot (0/1).
--
-- Returns 3 integers per event: verdict (0 counted, 1 duplicate,
-- 2 rate_limited, 3 bot, 4 replayed, 5 refused: unknown article), then
-- lifetime PV and UV when with_counts is 1 (else 0 0).
--
-- The order of checks is the embedded store's: replayed, bot,
-- rate_limited, duplicate, counted. The eventId record, the gate state and
-- every counter change happen in this one script, so a batch is applied
-- whole or not at all and a retried eventId is never counted twice.
local P = ARGV[1]
local now = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local vlimit = tonumber(ARGV[4])
local iplimit = tonumber(ARGV[5])
local eid_ttl = tonumber(ARGV[6])
local hkeep = tonumber(ARGV[7])
local dkeep = tonumber(ARGV[8])
local with_counts = ARGV[9] == '1'
local require_known = ARGV[10] == '1'
local n = tonumber(ARGV[11])

-- Rate logs: the last `limit` admission times of a key, oldest first, as
-- fixed-width decimal milliseconds in one string (one GET, one SET).
local W = 15
local RATE_MS = 60000
local RATE_TTL_MS = RATE_MS + 60000

local function rl_allows(log, clock, limit)
  if #log < limit * W then return true end
  return tonumber(string.sub(log, 1, W)) <= clock - RATE_MS
end

local function rl_record(log, clock, limit)
  local pos = 1
  local len = #log / W
  while len > 0 and tonumber(string.sub(log, pos, pos + W - 1)) <= clock - RATE_MS do
    pos = pos + W
    len = len - 1
  end
  if len >= limit then
    pos = pos + W
  end
  return string.sub(log, pos) .. string.format('%015d', clock)
end

local function ttl(expires_at)
  local t = expires_at - now
  if t < 60 then t = 60 end
  return t
end

local QNAMES = { 'q_dup', 'q_rl', 'q_bot', 'q_rep' }
local FIELD = { l = 'likes', c = 'comments', f = 'favorites', s = 'shares' }

local out = {}
local counted = 0
local changed, changed_list = {}, {}
local act_h, act_d = {}, {}
local q_global = { 0, 0, 0, 0 }
local q_hour = {}

-- Adds `by` to `field` of a bucket hash; a field's first value sets the
-- bucket's (and its sketch's) expiry.
local function bump(hash, hll, field, by, expires_at)
  if redis.call('HINCRBY', hash, field, by) == by then
    local t = ttl(expires_at)
    redis.call('EXPIRE', hash, t)
    if hll then redis.call('EXPIRE', hll, t) end
  end
end

local function register(meta, art, ts)
  if redis.call('HSETNX', meta, 'publishedAt', ts) == 1 then
    redis.call('ZADD', P .. 'articles:new', ts, art)
  end
end

for i = 0, n - 1 do
  local b = 12 + i * 11
  local kind, art, vh, vb = ARGV[b], ARGV[b + 1], ARGV[b + 2], ARGV[b + 3]
  local iph, ts, clock = ARGV[b + 4], tonumber(ARGV[b + 5]), tonumber(ARGV[b + 6])
  local arrival, eid, secs = tonumber(ARGV[b + 7]), ARGV[b + 8], tonumber(ARGV[b + 9])
  local bot = ARGV[b + 10] == '1'
  local meta = P .. 'meta:article:' .. art
  if require_known and redis.call('HGET', meta, 'known') ~= '1' then
    out[#out + 1] = 5
    out[#out + 1] = 0
    out[#out + 1] = 0
  else
    local verdict = nil
    local ekey = nil
    if eid ~= '' then
      ekey = P .. 'gate:eid:' .. eid
      local seen = redis.call('GET', ekey)
      if seen and arrival - tonumber(seen) < eid_ttl then verdict = 4 end
    end
    if not verdict and bot then verdict = 3 end
    if not verdict and (vlimit > 0 or iplimit > 0) then
      local ok = true
      local ikey, ilog
      if iplimit > 0 then
        ikey = P .. 'gate:rl:ip:' .. iph
        ilog = redis.call('GET', ikey) or ''
        ok = rl_allows(ilog, clock, iplimit)
      end
      if ok and vlimit > 0 then
        local vkey = P .. 'gate:rl:v:' .. vh
        -- A visitor seen for the first time: one command admits and records.
        if not redis.call('SET', vkey, string.format('%015d', clock), 'PX', RATE_TTL_MS, 'NX') then
          local vlog = redis.call('GET', vkey) or ''
          ok = rl_allows(vlog, clock, vlimit)
          if ok then
            redis.call('SET', vkey, rl_record(vlog, clock, vlimit), 'PX', RATE_TTL_MS)
          end
        end
      end
      if ok then
        if ikey then
          redis.call('SET', ikey, rl_record(ilog, clock, iplimit), 'PX', RATE_TTL_MS)
        end
      else
        verdict = 2
      end
    end
    if not verdict and (kind == 'v' or kind == 'l' or kind == 'f' or kind == 's') then
      -- The window follows event time and restarts at each counted view.
      local dkey = P .. 'gate:dd:' .. art .. ':' .. kind .. ':' .. vh
      if not redis.call('SET', dkey, ts, 'EX', window + 3600, 'NX') then
        local last = tonumber(redis.call('GET', dkey) or ts - window)
        if math.abs(ts - last) < window then
          verdict = 1
        elseif ts > last then
          redis.call('SET', dkey, ts, 'EX', window + 3600)
        end
      end
    end
    verdict = verdict or 0
    if ekey and verdict ~= 4 then
      redis.call('SET', ekey, arrival, 'EX', eid_ttl)
    end
    local hour = math.floor(ts / 3600)
    if verdict ~= 0 then
      local name = QNAMES[verdict]
      q_global[verdict] = q_global[verdict] + 1
      local qh = q_hour[hour]
      if not qh then
        qh = { 0, 0, 0, 0 }
        q_hour[hour] = qh
      end
      qh[verdict] = qh[verdict] + 1
      -- Quarantined events never register an article, but are tallied on
      -- known ones.
      if redis.call('EXISTS', meta) == 1 then
        redis.call('HINCRBY', P .. 'counter:article:' .. art, name, 1)
        bump(P .. 'bucket:h:' .. art .. ':' .. hour, nil, name, 1, (hour + 1) * 3600 + hkeep)
      end
    else
      counted = counted + 1
      if not changed[art] then
        changed[art] = true
        changed_list[#changed_list + 1] = art
      end
      local day = math.floor(ts / 86400)
      local ah = act_h[hour]
      if not ah then
        ah = {}
        act_h[hour] = ah
      end
      ah[art] = true
      local ad = act_d[day]
      if not ad then
        ad = {}
        act_d[day] = ad
      end
      ad[art] = true
      local hh, hd = P .. 'bucket:h:' .. art .. ':' .. hour, P .. 'bucket:d:' .. art .. ':' .. day
      local hexp, dexp = (hour + 1) * 3600 + hkeep, (day + 1) * 86400 + dkeep
      if kind == 'v' then
        if redis.call('INCRBY', P .. 'counter:views:' .. art, 1) == 1 then
          register(meta, art, ts)
        end
        redis.call('PFADD', P .. 'hll:uv:' .. art, vb)
        local uh, ud = P .. 'hll:uv:h:' .. art .. ':' .. hour, P .. 'hll:uv:d:' .. art .. ':' .. day
        bump(hh, uh, 'pv', 1, hexp)
        redis.call('PFADD', uh, vb)
        bump(hd, ud, 'pv', 1, dexp)
        redis.call('PFADD', ud, vb)
      else
        register(meta, art, ts)
        local ca = P .. 'counter:article:' .. art
        if kind == 'd' then
          redis.call('HINCRBY', ca, 'dwell_s', secs)
          redis.call('HINCRBY', ca, 'dwell_n', 1)
          bump(hh, nil, 'dwell_n', 1, hexp)
          redis.call('HINCRBY', hh, 'dwell_s', secs)
          bump(hd, nil, 'dwell_n', 1, dexp)
          redis.call('HINCRBY', hd, 'dwell_s', secs)
        else
          local f = FIELD[kind]
          redis.call('HINCRBY', ca, f, 1)
          bump(hh, nil, f, 1, hexp)
          bump(hd, nil, f, 1, dexp)
        end
      end
    end
    out[#out + 1] = verdict
    if with_counts and redis.call('EXISTS', meta) == 1 then
      out[#out + 1] = tonumber(redis.call('GET', P .. 'counter:views:' .. art) or '0')
      out[#out + 1] = redis.call('PFCOUNT', P .. 'hll:uv:' .. art)
    else
      out[#out + 1] = 0
      out[#out + 1] = 0
    end
  end
end

-- Per batch, not per event: totals, the change log rankings follow, and
-- the per-hour activity sets rankings are built from.
local CHUNK = 500
local function sadd_all(key, set, expires_at)
  local list = {}
  for id in pairs(set) do list[#list + 1] = id end
  for s = 1, #list, CHUNK do
    redis.call('SADD', key, unpack(list, s, math.min(s + CHUNK - 1, #list)))
  end
  redis.call('EXPIRE', key, ttl(expires_at))
end

if counted > 0 then
  redis.call('INCRBY', P .. 'stats:counted', counted)
  local seq = redis.call('INCR', P .. 'changes:seq')
  for s = 1, #changed_list, CHUNK do
    local args = {}
    for j = s, math.min(s + CHUNK - 1, #changed_list) do
      args[#args + 1] = seq
      args[#args + 1] = changed_list[j]
    end
    redis.call('ZADD', P .. 'changes', unpack(args))
  end
  for hour, set in pairs(act_h) do
    sadd_all(P .. 'active:h:' .. hour, set, (hour + 1) * 3600 + hkeep)
  end
  for day, set in pairs(act_d) do
    sadd_all(P .. 'active:d:' .. day, set, (day + 1) * 86400 + dkeep)
  end
end
for v = 1, 4 do
  if q_global[v] > 0 then
    redis.call('HINCRBY', P .. 'stats:quarantine', QNAMES[v], q_global[v])
  end
end
for hour, qh in pairs(q_hour) do
  local key = P .. 'stats:quarantine:h:' .. hour
  for v = 1, 4 do
    if qh[v] > 0 then redis.call('HINCRBY', key, QNAMES[v], qh[v]) end
  end
  redis.call('EXPIRE', key, ttl((hour + 1) * 3600 + dkeep))
end
return out
