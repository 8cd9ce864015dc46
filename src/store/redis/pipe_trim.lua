-- hotrank pipeline: trims a stream to what its group has not yet
-- acknowledged (docs/design.md, "Pipeline"). Entries before the group's
-- oldest pending entry, or before its last delivered entry when nothing
-- is pending, were acknowledged: XTRIM MINID drops them.
--
-- ARGV: stream, group. Returns the number of entries dropped.
local key, group = ARGV[1], ARGV[2]
if redis.call('EXISTS', key) == 0 then return 0 end
local last = nil
for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
  local name, ld = nil, nil
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] end
    if g[i] == 'last-delivered-id' then ld = g[i + 1] end
  end
  if name == group then last = ld end
end
if not last or last == '0-0' then return 0 end
local p = redis.call('XPENDING', key, group)
local minid = last
if tonumber(p[1]) > 0 then minid = p[2] end
return redis.call('XTRIM', key, 'MINID', minid)
