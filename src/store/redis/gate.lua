-- hotrank: the gate (docs/redis-keys.md), a chunk concatenated after a head
-- (ingest.lua, or pipeline_filter.lua) and common.lua.
--
-- Expects the locals: P, now, window, vlimit, iplimit, eid_ttl, bot_n,
-- bot_ms, require_known, max_articles, GATE_TIME and `ev` (parsed events:
-- kind, art, vh, vb, iph, ts, clock, arrival, eid, secs, bot, trusted,
-- hour, day; with GATE_TIME, optionally `at`, the entry's arrival in ms).
-- Reads every piece of gate state the batch needs, decides each event's
-- verdict in event order, then writes the gate state (clock, dedupe
-- pairs, gate slots, new articles). Leaves `verdicts` (one code per
-- event), `counted`, `arts` and each event's `tally` (whether its article
-- existed, for quarantine tallies) for the chunks after it.

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

local PADDED = { clock = false, s = '' }
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
  -- (Untrusted events of a batch share the gate clock: padded once.)
  if clock ~= PADDED.clock then
    PADDED.clock, PADDED.s = clock, string.format('%015d', clock)
  end
  local padded = PADDED.s
  if pos > #log then return padded end
  return string.sub(log, pos) .. padded
end


-- Arrival, as rate limits, the behaviour rule and eventIds measure it, is
-- on the site's gate clock (gate_clock.lua) with GATE_TIME: the same for
-- every node whatever its own clock says, and never running backward. An
-- event takes the clock's time, or its entry's own (`at`: a pipeline
-- entry's id, Redis's time when the API node appended it). A trusted
-- event's rate clock stays its event time. Gate state is slotted by the
-- gate clock too. Without GATE_TIME (replaying journaled entries) the
-- entries arrive at their `at` and the slots follow the head's `now`. On
-- a site whose gate follows its nodes' clocks (tests that simulate time)
-- arrival and slots are the node's, as sent.
local CLOCK = GATE_TIME and gate_clock(P) or nil
local gnow = CLOCK and math.floor(CLOCK.at / 1000) or now
local on_nodes = GATE_TIME and not CLOCK
-- (Events of one batch mostly share one time: each formatted once.)
local last_at, last_arr, last_arrs, last_ats = nil, nil, nil, nil
for _, e in ipairs(ev) do
  local at = not on_nodes and (e.at or (CLOCK and CLOCK.at))
  if at then
    if at ~= last_at then
      last_at, last_arr = at, math.floor(at / 1000)
      last_arrs, last_ats = string.format('%d', last_arr), string.format('%d', at)
    end
    e.arrival, e.arrs = last_arr, last_arrs
    if not e.trusted then
      e.clock, e.clocks = at, last_ats
    end
  end
end

-- Phase 1: read. Each gate family: its fields for this batch, from the
-- current and the previous slot. A call that declares its keys (a
-- cluster) declares the slots around the gate clock as its node last
-- learnt it; when the gate clock's slots are not among them, the call
-- answers { 'gateclock', <gate time, ms> } before reading or writing
-- anything, for the node to learn the clock and send it again.
local FAM = {}
local undeclared = false
local function family(name, S)
  local k = math.floor(gnow / S)
  local cur, prev = P .. name .. ':' .. k, P .. name .. ':' .. (k - 1)
  if DECLARED and not (DECLARED[cur] and DECLARED[prev]) then undeclared = true end
  local f = {
    cur = cur, prev = prev,
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
if undeclared then
  return { 'gateclock', string.format('%d', CLOCK and CLOCK.at or gnow * 1000) }
end
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
-- (A slot no entry was written in, as a quarantine slot most of the time,
-- is not asked about each field of the batch.)
for _, f in ipairs(FAM) do
  for _, key in ipairs(#f.list > 0 and { f.prev, f.cur } or {}) do
    for s = 1, redis.call('EXISTS', key) == 1 and #f.list or 0, CHUNK do
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
-- (Each article in its shard's articles:new; or, in a split site's gate
-- stage, as the read before it saw them: `GIVEN`.)
local arts_by, shard_order = by_shard(GIVEN and {} or art_list)
for _, id in ipairs(GIVEN and art_list or {}) do
  local g = GIVEN.arts[id]
  arts[id].exists = g ~= nil and g.exists
  arts[id].known = g ~= nil and g.known
end
for _, k in ipairs(shard_order) do
  local list, newest = arts_by[k], K(shard_prefix(P, k) .. 'articles:new')
  for s = 1, #list, CHUNK do
    local got = redis.call('ZMSCORE', newest, unpack(list, s, math.min(s + CHUNK - 1, #list)))
    for j = 1, #got do arts[list[s + j - 1]].exists = got[j] and true or false end
  end
end
local new_untrusted = false
for _, id in ipairs(GIVEN and {} or art_list) do
  local a = arts[id]
  if require_known or not a.exists then
    local m = redis.call('HMGET', K(AK(P, id) .. 'meta:article:' .. id), 'publishedAt', 'known')
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
    -- (Each shard's count when each keeps its own: their sum.)
    if GIVEN then article_count = GIVEN.count end
    for k = 0, (GIVEN and 0 or (SPLIT and NSHARDS or 1)) - 1 do
      article_count = article_count + tonumber(redis.call('GET', K(LK(P, k) .. 'stats:articles')) or '0')
    end
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

-- Articles viewed in the 60 s before `clock`, `art` left out. (A visitor
-- without any: one shared empty list, never appended to.)
local NONE = {}
local function recent(beh, clock, art)
  if beh == '' then return NONE end
  local list = {}
  for t, a in string.gmatch(beh, '(%d+),([^;]+);') do
    if tonumber(t) > clock - RATE_MS and a ~= art then
      list[#list + 1] = t .. ',' .. a .. ';'
    end
  end
  return list
end


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
    elseif bot_n > 0 and e.clock < (BOT.val[e.vh] and tonumber(BOT.val[e.vh]) or 0) then
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
      dd_new = e.tss
    else
      last = tonumber(last)
      if math.abs(e.ts - last) < window then
        verdict = 1
      elseif e.ts > last then
        dd_new = e.tss
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
    if e.efield then put(EID, e.efield, e.arrs) end
    if dd_new then
      if dd_out[e.dkey] == nil then dd_out[#dd_out + 1] = e.dkey end
      dd_out[e.dkey] = true
      dd_val[e.dkey] = dd_new
    end
    if views then
      local this = e.clocks .. ',' .. e.art .. ';'
      if #views == 0 then
        beh = this
      else
        views[#views + 1] = this
        beh = table.concat(views)
      end
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
if CLOCK then
  redis.call('HSET', CLOCK.key, 'wall', string.format('%d', CLOCK.wall),
    'at', string.format('%d', CLOCK.at))
end

local dd_ex = tostring(window + 3600)
for _, key in ipairs(dd_out) do
  redis.call('SET', key, dd_val[key], 'EX', dd_ex)
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
    redis.call('EXPIRE', f.cur, math.max(f.expires_at - gnow, 60))
  end
end

-- New articles: registered by their first counted event (in a split
-- site's gate stage, by the count stage of their shard).
for _, id in ipairs(GIVEN and {} or new_arts) do
  local meta = AK(P, id) .. 'meta:article:' .. id
  redis.call('HSETNX', meta, 'publishedAt', arts[id].published)
  redis.call('ZADD', SK(P, id) .. 'articles:new', arts[id].published, id)
end
if #new_arts > 0 and not GIVEN then
  if SPLIT then
    local by, order = by_shard(new_arts)
    for _, k in ipairs(order) do redis.call('INCRBY', LK(P, k) .. 'stats:articles', #by[k]) end
  else
    redis.call('INCRBY', P .. 'stats:articles', #new_arts)
  end
end

