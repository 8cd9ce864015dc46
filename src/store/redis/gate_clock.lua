-- hotrank: the site's gate clock (docs/redis-keys.md, "Gate state"), for
-- gate.lua. Redis's own TIME, which every API node and filter worker of
-- the site reads alike, made to never run backward: `gate:time` keeps the
-- last reading (`wall`, ms) and the gate time it gave (`at`, ms); a
-- reading advances `at` by the wall's progress since, and by nothing when
-- Redis's clock stepped back. Returns the clock; gate.lua saves it with
-- its other writes. Returns nil for a site whose gate follows its nodes'
-- clocks (field `source` = `node`: only tests that simulate time set it,
-- RedisStore::gate_on_node_clocks).
local function gate_clock(P)
  local key = K(P .. 'gate:time')
  local last = redis.call('HMGET', key, 'wall', 'at', 'source')
  if last[3] == 'node' then return nil end
  local t = redis.call('TIME')
  local wall = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local lw, la = tonumber(last[1]), tonumber(last[2])
  local at = wall
  if lw and la then at = la + math.max(wall - lw, 0) end
  return { key = key, wall = wall, at = at }
end
