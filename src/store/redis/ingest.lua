-- hotrank: gate and count a batch of events atomically (docs/redis-keys.md).
--
-- KEYS: none (one Redis), or on a cluster every key the batch may touch
-- (declared.lua checks the names).
-- ARGV[1..15]: prefix, now, dedupe window (s), visitor limit, ip limit,
-- eventId TTL (s), hourly keep (s), daily keep (s), with_counts (0/1),
-- require_known (0/1), max articles (0: none), behaviour limit (distinct
-- articles a minute, 0: off), behaviour quarantine (ms), batch id ('' =
-- none), number of events. Then 12 fields per event: kind (v d l c f s),
-- article id, visitor hex, visitor bytes (the 16 bytes added to UV
-- sketches), ip hex, ts, rate clock (ms), arrival (s), eventId hex or '',
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
-- `gate:<family>:<slot>` with
-- slot = floor(now / S): a field written during slot k is read during
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

if not (now and window and vlimit and iplimit and eid_ttl and hkeep and dkeep
    and max_articles and bot_n and bot_ms and n) or #ARGV ~= H + n * F then
  return redis.error_reply('ERR ingest.lua: malformed header')
end

local batch_key = batch_id ~= '' and (K(P .. 'gate:batch:' .. batch_id)) or nil
local BATCH_TTL = 120

-- A retried batch: the first call's answer, nothing applied again.
if batch_key then
  local done = redis.call('GET', batch_key)
  if done then
    local out = {}
    for v in string.gmatch(done, '[^,]+') do out[#out + 1] = tonumber(v) end
    return out
  end
end

-- Parse and check every event before reading or writing anything.
local KINDS = { v = true, d = true, l = true, c = true, f = true, s = true }
local ev = {}
for i = 1, n do
  local b = H + (i - 1) * F
  local e = {
    kind = ARGV[b + 1], art = ARGV[b + 2], vh = ARGV[b + 3], vb = ARGV[b + 4],
    iph = ARGV[b + 5], ts = tonumber(ARGV[b + 6]), clock = tonumber(ARGV[b + 7]),
    arrival = tonumber(ARGV[b + 8]), eid = ARGV[b + 9], secs = tonumber(ARGV[b + 10]),
    bot = ARGV[b + 11] == '1', trusted = ARGV[b + 12] == '1',
  }
  if not (KINDS[e.kind] and e.ts and e.clock and e.arrival and e.secs)
      or e.art == '' or e.vh == '' or e.iph == '' then
    return redis.error_reply('ERR ingest.lua: malformed event ' .. i)
  end
  e.hour = math.floor(e.ts / 3600)
  e.day = math.floor(e.ts / 86400)
  ev[i] = e
end

-- With declared keys (a cluster), every name the batch may write is
-- checked before anything is read or written (dedupe keys and gate slots
-- are checked where they are named, also before the first write).
if DECLARED then
  for _, name in ipairs({ 'clock', 'stats:counted', 'changes:seq', 'changes',
      'stats:quarantine', 'stats:articles', 'articles:new' }) do
    K(P .. name)
  end
  for _, e in ipairs(ev) do
    local a, h, d = e.art, e.hour, e.day
    K(P .. 'counter:views:' .. a)
    K(P .. 'hll:uv:' .. a)
    K(P .. 'counter:article:' .. a)
    K(P .. 'meta:article:' .. a)
    K(P .. 'bucket:h:' .. a .. ':' .. h)
    K(P .. 'hll:uv:h:' .. a .. ':' .. h)
    K(P .. 'bucket:d:' .. a .. ':' .. d)
    K(P .. 'hll:uv:d:' .. a .. ':' .. d)
    K(P .. 'active:h:' .. h)
    K(P .. 'active:d:' .. d)
    K(P .. 'stats:quarantine:h:' .. h)
  end
end

-- Rate logs: the last `limit` admission times of a key, oldest first, as
-- fixed-width decimal milliseconds in one string. A visitor's record is
-- its rate log, then '|' and '<ms>,<article>;' per article it viewed in
-- the last 60 s (the behaviour rule); its quarantine is in gate:bot.
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

-- Phase 1: read. Each gate family: its fields for this batch, from the
-- current and the previous slot.
local FAM = {}
local function family(name, S)
  local k = math.floor(now / S)
  local f = {
    cur = K(P .. name .. ':' .. k), prev = K(P .. name .. ':' .. (k - 1)),
    expires_at = (k + 2) * S, fields = {}, list = {}, val = {}, dirty = {}, out = {},
  }
  FAM[#FAM + 1] = f
  return f
end
local function want(f, field)
  if not f.fields[field] then
    f.fields[field] = true
    f.list[#f.list + 1] = field
  end
  return field
end
local track_visitors = vlimit > 0 or bot_n > 0
-- Dedupe entries are keys of their own (one per pair, newest time wins),
-- so that any later event finds them whatever the clock: read in one MGET.
local dd_keys, dd_seen, dd_val, dd_out = {}, {}, {}, {}
local EID = family('gate:eid', eid_ttl)
local RV = family('gate:rl:v', 120)
local RIP = family('gate:rl:ip', 120)
local BOT = family('gate:bot', math.max(60, math.floor(bot_ms / 1000)))
for _, e in ipairs(ev) do
  if e.eid ~= '' then e.efield = want(EID, e.eid) end
  if iplimit > 0 then e.ifield = want(RIP, e.iph) end
  if track_visitors then e.vfield = want(RV, e.vh) end
  if bot_n > 0 then want(BOT, e.vh) end
  if e.kind == 'v' or e.kind == 'l' or e.kind == 'f' or e.kind == 's' then
    e.dkey = K(P .. 'gate:dd:' .. e.art .. ':' .. e.kind .. ':' .. e.vh)
    if not dd_seen[e.dkey] then
      dd_seen[e.dkey] = true
      dd_keys[#dd_keys + 1] = e.dkey
    end
  end
end
local CHUNK = 2000
for s = 1, #dd_keys, CHUNK do
  local got = redis.call('MGET', unpack(dd_keys, s, math.min(s + CHUNK - 1, #dd_keys)))
  for j = 1, #got do dd_val[dd_keys[s + j - 1]] = got[j] end
end
for _, f in ipairs(FAM) do
  for _, key in ipairs({ f.prev, f.cur }) do
    for s = 1, #f.list, CHUNK do
      local got = redis.call('HMGET', key, unpack(f.list, s, math.min(s + CHUNK - 1, #f.list)))
      for j = 1, #got do
        if got[j] then f.val[f.list[s + j - 1]] = got[j] end
      end
    end
  end
end

-- Articles: live ones are in articles:new; the others may be deleted or
-- unregistered (one HMGET each), or new.
local arts, art_list = {}, {}
for _, e in ipairs(ev) do
  if not arts[e.art] then
    arts[e.art] = {}
    art_list[#art_list + 1] = e.art
  end
end
for s = 1, #art_list, CHUNK do
  local got = redis.call('ZMSCORE', K(P .. 'articles:new'), unpack(art_list, s, math.min(s + CHUNK - 1, #art_list)))
  for j = 1, #got do arts[art_list[s + j - 1]].exists = got[j] and true or false end
end
local new_untrusted = false
for _, id in ipairs(art_list) do
  local a = arts[id]
  if require_known or not a.exists then
    local m = redis.call('HMGET', K(P .. 'meta:article:' .. id), 'publishedAt', 'known')
    a.exists = m[1] and true or false
    a.known = m[2] == '1'
  end
end
local article_count = 0
if max_articles > 0 then
  for _, e in ipairs(ev) do
    if not arts[e.art].exists and not e.trusted then new_untrusted = true end
  end
  if new_untrusted then
    article_count = tonumber(redis.call('GET', K(P .. 'stats:articles')) or '0')
  end
end

-- Phase 2: decide, in event order, on the state read plus this batch's
-- own changes.
-- Changed gate fields, each written once with its final value.
local function put(f, field, value)
  f.val[field] = value
  if not f.dirty[field] then
    f.dirty[field] = true
    f.out[#f.out + 1] = field
  end
end

local function split_visitor(rec)
  if not rec or rec == '|' then return '', '' end
  local bar = string.find(rec, '|', 1, true)
  if not bar then return rec, '' end
  return string.sub(rec, 1, bar - 1), string.sub(rec, bar + 1)
end

-- Articles viewed in the 60 s before `clock`, `art` left out.
local function recent(beh, clock, art)
  local list = {}
  if beh == '' then return list end
  for t, a in string.gmatch(beh, '(%d+),([^;]+);') do
    if tonumber(t) > clock - RATE_MS and a ~= art then
      list[#list + 1] = t .. ',' .. a .. ';'
    end
  end
  return list
end

local QNAMES = { 'q_dup', 'q_rl', 'q_bot', 'q_rep' }
local QSLOT = { 1, 2, 3, 4, nil, nil, 3, 3 }
local FIELD = { l = 'likes', c = 'comments', f = 'favorites', s = 'shares' }

local verdicts = {}
local counted = 0
local new_arts = {}
for i, e in ipairs(ev) do
  local a = arts[e.art]
  local verdict = nil
  if require_known and not a.known then
    verdict = 5
  elseif max_articles > 0 and not a.exists and not e.trusted and article_count >= max_articles then
    verdict = 6
  end
  if not verdict and e.efield then
    local seen = EID.val[e.efield]
    if seen and e.arrival - tonumber(seen) < eid_ttl then verdict = 4 end
  end
  local vlog, beh = '', ''
  if e.vfield then vlog, beh = split_visitor(RV.val[e.vfield]) end
  if not verdict then
    if e.bot then
      verdict = 3
    elseif bot_n > 0 and e.clock < tonumber(BOT.val[e.vh] or '0') then
      verdict = 7
    end
  end
  local ilog = ''
  if not verdict then
    local ok = true
    if e.ifield then
      ilog = RIP.val[e.ifield] or ''
      ok = rl_allows(ilog, e.clock, iplimit)
    end
    if ok and vlimit > 0 then ok = rl_allows(vlog, e.clock, vlimit) end
    if not ok then verdict = 2 end
  end
  local dd_new = nil
  if not verdict and e.dkey then
    -- The window follows event time and restarts at each counted view.
    local last = dd_val[e.dkey]
    if not last then
      dd_new = e.ts
    else
      last = tonumber(last)
      if math.abs(e.ts - last) < window then
        verdict = 1
      elseif e.ts > last then
        dd_new = e.ts
      end
    end
  end
  local views = nil
  if not verdict and bot_n > 0 and e.kind == 'v' then
    views = recent(beh, e.clock, e.art)
    if #views >= bot_n then
      verdict = 8
      put(BOT, e.vh, e.clock + bot_ms)
      beh = ''
      views = nil
    end
  end
  verdict = verdict or 0
  if verdict <= 1 then
    -- Counted and duplicate events take rate budget.
    if e.ifield then put(RIP, e.ifield, rl_record(ilog, e.clock, iplimit)) end
    if vlimit > 0 then vlog = rl_record(vlog, e.clock, vlimit) end
  end
  if verdict == 0 then
    counted = counted + 1
    if e.efield then put(EID, e.efield, e.arrival) end
    if dd_new then
      if dd_out[e.dkey] == nil then dd_out[#dd_out + 1] = e.dkey end
      dd_out[e.dkey] = true
      dd_val[e.dkey] = dd_new
    end
    if views then
      views[#views + 1] = e.clock .. ',' .. e.art .. ';'
      beh = table.concat(views)
    end
    if not a.exists then
      a.exists = true
      a.published = e.ts
      new_arts[#new_arts + 1] = e.art
      article_count = article_count + 1
    end
  end
  if e.vfield then
    local rec = vlog .. '|' .. beh
    if rec ~= (RV.val[e.vfield] or '|') then put(RV, e.vfield, rec) end
  end
  -- Quarantine is tallied on articles that exist at this event.
  e.tally = a.exists
  verdicts[i] = verdict
end

-- Phase 3: write. (Every name below was checked before the first write,
-- in the DECLARED block at the top: keep that block in step with them.)
-- Queries never run before the newest arrival any ingest carried
-- (`clock`, read by sync.lua).
if now > tonumber(redis.call('GET', P .. 'clock') or '0') then
  redis.call('SET', P .. 'clock', now)
end

for _, key in ipairs(dd_out) do
  redis.call('SET', key, dd_val[key], 'EX', window + 3600)
end
for _, f in ipairs(FAM) do
  if #f.out > 0 then
    for s = 1, #f.out, CHUNK do
      local args = {}
      for j = s, math.min(s + CHUNK - 1, #f.out) do
        args[#args + 1] = f.out[j]
        args[#args + 1] = f.val[f.out[j]]
      end
      redis.call('HSET', f.cur, unpack(args))
    end
    redis.call('EXPIRE', f.cur, ttl(f.expires_at))
  end
end

-- Other counters, aggregated per key: `per[key]` holds field increments.
local per, key_order, expiry = {}, {}, {}
local function bucket(key, expires_at)
  local t = per[key]
  if not t then
    t = {}
    per[key] = t
    key_order[#key_order + 1] = key
    if expires_at then expiry[key] = expires_at end
  end
  return t
end
local function add(t, field, by)
  t[field] = (t[field] or 0) + by
end
-- One counted view into an hourly or daily bucket and its sketch; the
-- bucket's first field sets the expiry of both, after the PFADD that
-- creates the sketch.
local function view_bucket(key, hll, expires_at, vb)
  local new = redis.call('HINCRBY', key, 'pv', 1) == 1
  redis.call('PFADD', hll, vb)
  if new then
    local s = ttl(expires_at)
    redis.call('EXPIRE', key, s)
    redis.call('EXPIRE', hll, s)
  end
end

local changed, changed_list = {}, {}
local act_h, act_d = {}, {}
local q_global = { 0, 0, 0, 0 }
local q_hour = {}
for i, e in ipairs(ev) do
  local v = verdicts[i]
  local a = arts[e.art]
  if v == 0 then
    if not changed[e.art] then
      changed[e.art] = true
      changed_list[#changed_list + 1] = e.art
    end
    local ah = act_h[e.hour]
    if not ah then ah = {}; act_h[e.hour] = ah end
    ah[e.art] = true
    local ad = act_d[e.day]
    if not ad then ad = {}; act_d[e.day] = ad end
    ad[e.art] = true
    if e.kind == 'v' then
      -- Views, by far the most events, go straight to their keys: with
      -- most articles seen once per batch, aggregating costs more Lua
      -- than it saves in calls.
      redis.call('INCRBY', P .. 'counter:views:' .. e.art, 1)
      redis.call('PFADD', P .. 'hll:uv:' .. e.art, e.vb)
      view_bucket(P .. 'bucket:h:' .. e.art .. ':' .. e.hour, P .. 'hll:uv:h:' .. e.art .. ':' .. e.hour,
        (e.hour + 1) * 3600 + hkeep, e.vb)
      view_bucket(P .. 'bucket:d:' .. e.art .. ':' .. e.day, P .. 'hll:uv:d:' .. e.art .. ':' .. e.day,
        (e.day + 1) * 86400 + dkeep, e.vb)
    else
      local hh = bucket(P .. 'bucket:h:' .. e.art .. ':' .. e.hour, (e.hour + 1) * 3600 + hkeep)
      local hd = bucket(P .. 'bucket:d:' .. e.art .. ':' .. e.day, (e.day + 1) * 86400 + dkeep)
      local life = bucket(P .. 'counter:article:' .. e.art)
      if e.kind == 'd' then
      add(life, 'dwell_s', e.secs)
      add(life, 'dwell_n', 1)
      add(hh, 'dwell_n', 1)
      add(hh, 'dwell_s', e.secs)
      add(hd, 'dwell_n', 1)
      add(hd, 'dwell_s', e.secs)
      else
        local f = FIELD[e.kind]
        add(life, f, 1)
        add(hh, f, 1)
        add(hd, f, 1)
      end
    end
  elseif v <= 4 or v >= 7 then
    local slot = QSLOT[v]
    local name = QNAMES[slot]
    q_global[slot] = q_global[slot] + 1
    local qh = q_hour[e.hour]
    if not qh then qh = { 0, 0, 0, 0 }; q_hour[e.hour] = qh end
    qh[slot] = qh[slot] + 1
    -- Quarantined events never register an article, but are tallied on
    -- the ones that exist.
    if e.tally then
      add(bucket(P .. 'counter:article:' .. e.art), name, 1)
      add(bucket(P .. 'bucket:h:' .. e.art .. ':' .. e.hour, (e.hour + 1) * 3600 + hkeep), name, 1)
    end
  end
end

-- New articles: registered by their first counted event.
for _, id in ipairs(new_arts) do
  local meta = P .. 'meta:article:' .. id
  redis.call('HSETNX', meta, 'publishedAt', arts[id].published)
  redis.call('ZADD', P .. 'articles:new', arts[id].published, id)
end
if #new_arts > 0 then redis.call('INCRBY', P .. 'stats:articles', #new_arts) end

for _, key in ipairs(key_order) do
  local is_new = false
  for field, by in pairs(per[key]) do
    if redis.call('HINCRBY', key, field, by) == by then is_new = true end
  end
  -- (A bucket with views already has its expiry.)
  if expiry[key] and is_new then redis.call('EXPIRE', key, ttl(expiry[key])) end
end

-- Per batch, not per event: totals, the change log rankings follow, and
-- the per-hour activity sets rankings are built from.
local SET_CHUNK = 500
local function sadd_all(key, set, expires_at)
  local list = {}
  for id in pairs(set) do list[#list + 1] = id end
  for s = 1, #list, SET_CHUNK do
    redis.call('SADD', key, unpack(list, s, math.min(s + SET_CHUNK - 1, #list)))
  end
  redis.call('EXPIRE', key, ttl(expires_at))
end

if counted > 0 then
  redis.call('INCRBY', P .. 'stats:counted', counted)
  local seq = redis.call('INCR', P .. 'changes:seq')
  for s = 1, #changed_list, SET_CHUNK do
    local args = {}
    for j = s, math.min(s + SET_CHUNK - 1, #changed_list) do
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

local out = {}
for i, e in ipairs(ev) do
  out[#out + 1] = verdicts[i]
  if with_counts and arts[e.art].exists and verdicts[i] ~= 5 and verdicts[i] ~= 6 then
    out[#out + 1] = tonumber(redis.call('GET', P .. 'counter:views:' .. e.art) or '0')
    out[#out + 1] = redis.call('PFCOUNT', P .. 'hll:uv:' .. e.art)
  else
    out[#out + 1] = 0
    out[#out + 1] = 0
  end
end
if batch_key then
  redis.call('SET', batch_key, table.concat(out, ','), 'EX', BATCH_TTL)
end
return out
