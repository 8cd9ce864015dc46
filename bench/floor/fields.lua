-- bench/floor/keys.lua with the dedupe pairs inside the visitor's entry
-- (one field per visitor: its rate entry, then 'article,ts;' per pair),
-- so a fresh pair costs no key of its own: per event one field read and
-- one field write. (The entry's slot would have to outlive the dedupe
-- window; a visitor viewing many articles rewrites a long entry.)
-- ARGV: prefix, now, n, then per event: article, visitor bytes, ts, clock.
local P, now, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local hour = math.floor(now / 3600)
local fields = {}
for i = 1, n do fields[i] = ARGV[3 + (i - 1) * 4 + 2] end
local vkey = P .. 'v:' .. math.floor(now / 4500)
local got = redis.call('HMGET', vkey, unpack(fields))
local out, rate, groups, order = {}, {}, {}, {}
for i = 1, n do
  local b = 3 + (i - 1) * 4
  local a, entry = ARGV[b + 1], got[i] or ''
  if string.find(entry, ';' .. a .. ',', 1, true) then
    out[i] = 1
  else
    out[i] = 0
    entry = entry .. ';' .. a .. ',' .. ARGV[b + 3]
    got[i] = entry
    rate[#rate + 1] = fields[i]
    rate[#rate + 1] = ARGV[b + 4] .. entry
    local g = groups[a]
    if not g then
      g = {}
      groups[a] = g
      order[#order + 1] = a
    end
    g[#g + 1] = ARGV[b + 2]
  end
end
if #rate > 0 then
  redis.call('HSET', vkey, unpack(rate))
  redis.call('EXPIRE', vkey, 9000)
end
for _, a in ipairs(order) do
  local g = groups[a]
  redis.call('INCRBY', P .. 'views:' .. a, #g)
  redis.call('PFADD', P .. 'uv:' .. a, unpack(g))
  redis.call('PFADD', P .. 'uv:h:' .. a .. ':' .. hour, unpack(g))
  redis.call('HINCRBY', P .. 'b:h:' .. a .. ':' .. hour, 'pv', #g)
end
if #order > 0 then redis.call('SADD', P .. 'active:h:' .. hour, unpack(order)) end
return out
