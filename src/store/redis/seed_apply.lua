-- hotrank, seed layout: after apply.lua, the counted events also go into
-- the keys of seed 001 and seed 004, for their code to read:
-- - seed 001: `cnt:pv|uv|dur|like|cmt:<id>:<yyyyMMddHH>` (UTC hour of the
--   event), each expiring 7 days after its hour; `cnt:uv` is set to the
--   hour's UV (PFCOUNT of hotrank's hourly sketch, the seed's
--   "deduplicated before written");
-- - seed 004: `<yyyy-MM-dd>` (UTC day of the view), `ZINCRBY 1 <id>` per
--   counted view, expiring with hotrank's daily buckets.
-- Expects apply.lua's locals: P, now, dkeep, ev, verdicts, ttl().
do
  local SEED001_KEEP = 7 * 86400
  -- The civil date of a day since the epoch (proleptic Gregorian, UTC),
  -- as src/time.rs computes it.
  local function civil(z)
    z = z + 719468
    local era = math.floor(z / 146097)
    local doe = z - era * 146097
    local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524)
      - math.floor(doe / 146096)) / 365)
    local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
    local mp = math.floor((5 * doy + 2) / 153)
    local d = doy - math.floor((153 * mp + 2) / 5) + 1
    local m = mp < 10 and mp + 3 or mp - 9
    local y = yoe + era * 400 + (m <= 2 and 1 or 0)
    return y, m, d
  end
  local stamps, dates = {}, {}
  local function stamp(hour)
    local s = stamps[hour]
    if not s then
      local y, m, d = civil(math.floor(hour / 24))
      s = string.format('%04d%02d%02d%02d', y, m, d, hour % 24)
      stamps[hour] = s
    end
    return s
  end
  local function date(day)
    local s = dates[day]
    if not s then
      local y, m, d = civil(day)
      s = string.format('%04d-%02d-%02d', y, m, d)
      dates[day] = s
    end
    return s
  end
  local CNT = { v = 'pv', d = 'dur', l = 'like', c = 'cmt' }
  local uv_hours = {}
  for i, e in ipairs(ev) do
    local metric = CNT[e.kind]
    if verdicts[i] == 0 and metric then
      local key = P .. 'cnt:' .. metric .. ':' .. e.art .. ':' .. stamp(e.hour)
      local by = (e.kind == 'd') and e.secs or 1
      if redis.call('INCRBY', key, by) == by then
        redis.call('EXPIRE', key, ttl((e.hour + 1) * 3600 + SEED001_KEEP))
      end
      if e.kind == 'v' then
        uv_hours[e.art .. ':' .. e.hour] = { e.art, e.hour }
        local zkey = P .. date(e.day)
        if redis.call('ZINCRBY', zkey, 1, e.art) == '1' then
          redis.call('EXPIRE', zkey, ttl((e.day + 1) * 86400 + dkeep))
        end
      end
    end
  end
  for _, ah in pairs(uv_hours) do
    local art, hour = ah[1], ah[2]
    local uv = redis.call('PFCOUNT', P .. 'hll:uv:h:' .. art .. ':' .. hour)
    redis.call('SET', P .. 'cnt:uv:' .. art .. ':' .. stamp(hour), uv,
      'EX', ttl((hour + 1) * 3600 + SEED001_KEEP))
  end
end
