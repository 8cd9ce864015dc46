-- hotrank: the counters of several articles over a window, or over their
-- lifetimes, in one call (a call costs Redis more than one article's reads:
-- a rebuild reads every article of a ranking).
--
-- ARGV[1] = 'w', ARGV[2] = m articles, ARGV[2 + j] = n_j: article j's
-- KEYS, in article order, are its n_j window bucket hashes, then their
-- n_j UV sketches, then its counter:article (for the votes); UV is the
-- cardinality of the union of the sketches (multi-key PFCOUNT), never a
-- sum.
-- ARGV[1] = 'a', ARGV[2] = m: article j's KEYS are counter:views,
-- counter:article, hll:uv (lifetime).
--
-- Returns, per article in order, {pv, likes, comments, favorites, shares,
-- dwell_s, dwell_n, uv, ups, downs}, flat (10 integers an article); votes
-- are always lifetime values. On a cluster every key of a call is in one
-- slot: the caller groups articles by slot.
local F = { 'pv', 'likes', 'comments', 'favorites', 'shares', 'dwell_s', 'dwell_n' }
local lifetime = ARGV[1] == 'a'
local m = tonumber(ARGV[2])
local out = {}
local at = 0
for j = 1, m do
  local c = { 0, 0, 0, 0, 0, 0, 0 }
  local uv = 0
  local counters
  if lifetime then
    c[1] = tonumber(redis.call('GET', KEYS[at + 1]) or '0')
    counters = KEYS[at + 2]
    local h = redis.call('HMGET', counters, 'likes', 'comments', 'favorites', 'shares', 'dwell_s', 'dwell_n')
    for i = 1, 6 do c[i + 1] = tonumber(h[i] or '0') end
    if c[1] > 0 then uv = redis.call('PFCOUNT', KEYS[at + 3]) end
    at = at + 3
  else
    local n = tonumber(ARGV[2 + j])
    local hlls = {}
    for k = 1, n do
      local h = redis.call('HMGET', KEYS[at + k], unpack(F))
      local pv = tonumber(h[1] or '0')
      for i = 1, 7 do c[i] = c[i] + tonumber(h[i] or '0') end
      if pv > 0 then hlls[#hlls + 1] = KEYS[at + n + k] end
    end
    if #hlls > 0 then uv = redis.call('PFCOUNT', unpack(hlls)) end
    counters = KEYS[at + 2 * n + 1]
    at = at + 2 * n + 1
  end
  local votes = redis.call('HMGET', counters, 'ups', 'downs')
  local base = (j - 1) * 10
  for i = 1, 7 do out[base + i] = c[i] end
  out[base + 8] = uv
  out[base + 9] = tonumber(votes[1] or '0')
  out[base + 10] = tonumber(votes[2] or '0')
end
if at ~= #KEYS then
  return redis.error_reply('ERR window.lua: keys do not match the articles')
end
return out
