-- hotrank: apply verdicts (docs/redis-keys.md), a chunk concatenated after
-- a head (ingest.lua, or pipeline_count.lua), common.lua and, in ingest,
-- gate.lua.
--
-- Expects the locals: P, now, hkeep, dkeep, `ev` (events with kind, art,
-- vb, secs, hour, day, tally), `verdicts` (one code per event) and
-- `counted` (how many are 0), and shard.lua's helpers. Writes the
-- counters, hourly and daily buckets, sketches, activity sets and change
-- log (of each article's shard) and per-article quarantine tallies; the
-- site's totals are totals.lua's.

local QNAMES = { 'q_dup', 'q_rl', 'q_bot', 'q_rep' }
local QSLOT = { 1, 2, 3, 4, nil, nil, 3, 3 }
local FIELD = { l = 'likes', c = 'comments', f = 'favorites', s = 'shares' }

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
-- Counted views, grouped per article, hour and day (a batch's events are
-- almost always in one hour, so the group of an article is keyed by its
-- id, and by id, hour and day only when its events span hours): each
-- group is one INCRBY, one HINCRBY per bucket and one PFADD per sketch
-- with all its visitors, however often the batch repeats the article.
local vgroups, vorder = {}, {}
local function view_group(e)
  local key = e.art
  local g = vgroups[key]
  if g and (g.hour ~= e.hour or g.day ~= e.day) then
    key = e.art .. ':' .. e.hour .. ':' .. e.day
    g = vgroups[key]
  end
  if not g then
    g = { art = e.art, hour = e.hour, day = e.day, n = 0 }
    vgroups[key] = g
    vorder[#vorder + 1] = g
  end
  g.n = g.n + 1
  g[g.n] = e.vb
  -- The review's evidence: the view's network block, when known (only
  -- under `[review] mode = "suspicious"`: no table is made otherwise).
  if e.net and e.net ~= '' then
    if not g.nets then
      g.nets, g.nvb = {}, {}
    end
    g.nets[#g.nets + 1] = e.net
    g.nvb[#g.nvb + 1] = e.vb
  end
end
-- Numbers as strings, each formatted once per batch: hours and days in key
-- names, counts and expiries as arguments (a Lua number concatenated or
-- passed to redis.call is a floating-point sprintf each time).
local NUMSTR = {}
local function nstr(x)
  local s = NUMSTR[x]
  if not s then
    s = tostring(x)
    NUMSTR[x] = s
  end
  return s
end
local function ttl_s(expires_at)
  return nstr(ttl(expires_at))
end

-- A group's views into an hourly or daily bucket and its sketch; the
-- bucket's first field sets the expiry of both, after the PFADD that
-- creates the sketch.
-- (PFADD in slices: unpack has a stack limit.)
local PF_CHUNK = 1000
local function pfadd(hll, g, n)
  for s = 1, n or g.n, PF_CHUNK do
    redis.call('PFADD', hll, unpack(g, s, math.min(s + PF_CHUNK - 1, n or g.n)))
  end
end
local function view_bucket(key, hll, expires_at, g)
  local new = redis.call('HINCRBY', key, 'pv', nstr(g.n)) == g.n
  pfadd(hll, g)
  if new then
    local s = ttl_s(expires_at)
    redis.call('EXPIRE', key, s)
    redis.call('EXPIRE', hll, s)
  end
end

-- Counted events by category (`scale=category`): each counted event adds
-- one to its article's category as the article's metadata says now (''
-- for none), in the event's hour and UTC day, in the copy of the site's
-- bookkeeping its article's writes touch (LK). Per event only a count per
-- article and hour or day (no string built); after the loop one HGET per
-- distinct article and one HINCRBY per (hour or day, category).
local cat_art = { h = {}, d = {} }
local function cat_count(e)
  local t = cat_art.h[e.hour]
  if not t then t = {}; cat_art.h[e.hour] = t end
  t[e.art] = (t[e.art] or 0) + 1
  t = cat_art.d[e.day]
  if not t then t = {}; cat_art.d[e.day] = t end
  t[e.art] = (t[e.art] or 0) + 1
end

local changed, changed_list = {}, {}
local act_h, act_d = {}, {}
for i, e in ipairs(ev) do
  local v = verdicts[i]
  if v == 0 then
    cat_count(e)
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
      view_group(e)
    else
      local A = AK(P, e.art)
      local hh = bucket(A .. 'bucket:h:' .. e.art .. ':' .. nstr(e.hour), (e.hour + 1) * 3600 + hkeep)
      local hd = bucket(A .. 'bucket:d:' .. e.art .. ':' .. nstr(e.day), (e.day + 1) * 86400 + dkeep)
      local life = bucket(A .. 'counter:article:' .. e.art)
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
    local name = QNAMES[QSLOT[v]]
    -- Quarantined events never register an article, but are tallied on
    -- the ones that exist.
    if e.tally then
      local A = AK(P, e.art)
      add(bucket(A .. 'counter:article:' .. e.art), name, 1)
      add(bucket(A .. 'bucket:h:' .. e.art .. ':' .. e.hour, (e.hour + 1) * 3600 + hkeep), name, 1)
    end
  end
end

for _, g in ipairs(vorder) do
  local a, h, d = g.art, nstr(g.hour), nstr(g.day)
  local A = AK(P, a)
  redis.call('INCRBY', A .. 'counter:views:' .. a, nstr(g.n))
  pfadd(A .. 'hll:uv:' .. a, g)
  view_bucket(A .. 'bucket:h:' .. a .. ':' .. h, A .. 'hll:uv:h:' .. a .. ':' .. h, (g.hour + 1) * 3600 + hkeep, g)
  view_bucket(A .. 'bucket:d:' .. a .. ':' .. d, A .. 'hll:uv:d:' .. a .. ':' .. d, (g.day + 1) * 86400 + dkeep, g)
  -- `[review] mode = "suspicious"`: the hour's network blocks and their
  -- visitors, expiring with the hour's bucket.
  if g.nets then
    local s = ttl_s((g.hour + 1) * 3600 + hkeep)
    for _, pair in ipairs({ { 'hll:net:h:', g.nets }, { 'hll:netuv:h:', g.nvb } }) do
      local key = A .. pair[1] .. a .. ':' .. h
      pfadd(key, pair[2], #pair[2])
      redis.call('EXPIRE', key, s)
    end
  end
end

for _, key in ipairs(key_order) do
  local is_new = false
  for field, by in pairs(per[key]) do
    if redis.call('HINCRBY', key, field, nstr(by)) == by then is_new = true end
  end
  -- (A bucket with views already has its expiry.)
  if expiry[key] and is_new then redis.call('EXPIRE', key, ttl_s(expiry[key])) end
end

-- An hour's counts are read for its day and the next (a movement baseline
-- just after midnight); a day's for the 30 days it is in a window, and one
-- more.
local cat_of = {}
for _, unit in ipairs({ 'h', 'd' }) do
  for n, arts in pairs(cat_art[unit]) do
    local cat_n, key_of = {}, {}
    for a, by in pairs(arts) do
      local c = cat_of[a]
      if not c then
        c = redis.call('HGET', AK(P, a) .. 'meta:article:' .. a, 'category') or ''
        cat_of[a] = c
      end
      local L = LK(P, shard_of(a))
      local t = cat_n[L]
      if not t then
        t = {}
        cat_n[L] = t
        key_of[#key_of + 1] = L
      end
      t[c] = (t[c] or 0) + by
    end
    local expires_at = unit == 'h' and (math.floor(n / 24) + 2) * 86400 or (n + 31) * 86400
    for _, L in ipairs(key_of) do
      local key = L .. 'stats:cat:' .. unit .. ':' .. nstr(n)
      for c, by in pairs(cat_n[L]) do redis.call('HINCRBY', key, c, nstr(by)) end
      redis.call('EXPIRE', key, ttl_s(expires_at))
    end
  end
end

-- Per batch, not per event: totals, the change log rankings follow, and
-- the per-hour activity sets rankings are built from (each shard's own:
-- a batch may touch every shard, all in this one call).
local SET_CHUNK = 500
local function sadd_all(key, list, expires_at)
  for s = 1, #list, SET_CHUNK do
    redis.call('SADD', key, unpack(list, s, math.min(s + SET_CHUNK - 1, #list)))
  end
  redis.call('EXPIRE', key, ttl(expires_at))
end
-- `set`'s ids into the set `name` of their shards.
local function sadd_sharded(name, set, expires_at)
  local list = {}
  for id in pairs(set) do list[#list + 1] = id end
  if NSHARDS == 1 then return sadd_all(P .. name, list, expires_at) end
  local by, order = by_shard(list)
  for _, k in ipairs(order) do sadd_all(shard_prefix(P, k) .. name, by[k], expires_at) end
end

if counted > 0 then
  -- Changed articles by shard, in first-change order; one seq per shard.
  local changed_by, shard_order = by_shard(changed_list)
  for _, k in ipairs(shard_order) do
    local S, list = shard_prefix(P, k), changed_by[k]
    local seq = tostring(redis.call('INCR', S .. 'changes:seq'))
    for s = 1, #list, SET_CHUNK do
      local args = {}
      for j = s, math.min(s + SET_CHUNK - 1, #list) do
        args[#args + 1] = seq
        args[#args + 1] = list[j]
      end
      redis.call('ZADD', S .. 'changes', unpack(args))
    end
  end
  for _, k in ipairs(shard_order) do
    local list = changed_by[k]
    for s = 1, #list, SET_CHUNK do
      redis.call('SADD', LK(P, k) .. 'archive:dirty', unpack(list, s, math.min(s + SET_CHUNK - 1, #list)))
    end
  end
  for hour, set in pairs(act_h) do
    sadd_sharded('active:h:' .. hour, set, (hour + 1) * 3600 + hkeep)
  end
  for day, set in pairs(act_d) do
    sadd_sharded('active:d:' .. day, set, (day + 1) * 86400 + dkeep)
  end
end
