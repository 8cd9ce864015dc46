-- hotrank pipeline: takes back raw entries the journal refused
-- (docs/design.md, "Disaster recovery"): the API node answers 503, so the
-- events must not count. An entry no filter worker has read yet (after the
-- group's last delivered id) is deleted; one already read stays (and
-- counts: a client retry may count it twice).
--
-- ARGV: number of partitions m; then per partition its raw stream, the
-- number of ids c, and the ids. Returns { deleted, already read }.
local function id_lt(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end
local m = tonumber(ARGV[1])
local pos, deleted, read = 2, 0, 0
for _ = 1, m do
  local key, c = ARGV[pos], tonumber(ARGV[pos + 1])
  local last = '0-0'
  if redis.call('EXISTS', key) == 1 then
    for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
      local name, ld = nil, nil
      for i = 1, #g, 2 do
        if g[i] == 'name' then name = g[i + 1] end
        if g[i] == 'last-delivered-id' then ld = g[i + 1] end
      end
      if name == 'filter' then last = ld end
    end
  end
  for i = 1, c do
    local id = ARGV[pos + 1 + i]
    if id_lt(last, id) then
      deleted = deleted + redis.call('XDEL', key, id)
    else
      read = read + 1
    end
  end
  pos = pos + 2 + c
end
return { deleted, read }
