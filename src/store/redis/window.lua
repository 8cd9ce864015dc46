-- hotrank: one article's counters over a window, or over its lifetime.
--
-- ARGV[1] = 'w': KEYS are the window's bucket hashes (ARGV[2] of them)
-- followed by their UV sketches, then counter:article (for the votes);
-- UV is the cardinality of the union of the sketches (multi-key PFCOUNT),
-- never a sum.
-- ARGV[1] = 'a': KEYS = counter:views, counter:article, hll:uv (lifetime).
--
-- Returns {pv, likes, comments, favorites, shares, dwell_s, dwell_n, uv,
-- ups, downs}; votes are always lifetime values.
local F = { 'pv', 'likes', 'comments', 'favorites', 'shares', 'dwell_s', 'dwell_n' }
local c = { 0, 0, 0, 0, 0, 0, 0 }
local uv = 0
if ARGV[1] == 'a' then
  c[1] = tonumber(redis.call('GET', KEYS[1]) or '0')
  local h = redis.call('HMGET', KEYS[2], 'likes', 'comments', 'favorites', 'shares', 'dwell_s', 'dwell_n')
  for i = 1, 6 do c[i + 1] = tonumber(h[i] or '0') end
  if c[1] > 0 then uv = redis.call('PFCOUNT', KEYS[3]) end
else
  local n = tonumber(ARGV[2])
  local hlls = {}
  for k = 1, n do
    local h = redis.call('HMGET', KEYS[k], unpack(F))
    local pv = tonumber(h[1] or '0')
    for i = 1, 7 do c[i] = c[i] + tonumber(h[i] or '0') end
    if pv > 0 then hlls[#hlls + 1] = KEYS[n + k] end
  end
  if #hlls > 0 then uv = redis.call('PFCOUNT', unpack(hlls)) end
end
c[8] = uv
local votes = redis.call('HMGET', (ARGV[1] == 'a') and KEYS[2] or KEYS[2 * tonumber(ARGV[2]) + 1], 'ups', 'downs')
c[9] = tonumber(votes[1] or '0')
c[10] = tonumber(votes[2] or '0')
return c
