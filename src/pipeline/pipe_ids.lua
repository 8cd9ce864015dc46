-- hotrank pipeline: helpers on stream entry ids and consumer groups,
-- a chunk in front of the scripts that compare ids (pipe_trim.lua,
-- pipe_unappend.lua, pipe_position.lua, pipe_journal_trim.lua).
-- Whether entry id `a` (`ms-seq`) comes before `b`.
local function id_lt(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if not (am and bm) then return false end
  am, as, bm, bs = tonumber(am), tonumber(as), tonumber(bm), tonumber(bs)
  return am < bm or (am == bm and as < bs)
end
-- The last entry `group` was delivered on stream `key` (nil: no stream
-- or no such group).
local function last_delivered(key, group)
  if redis.call('EXISTS', key) == 0 then return nil end
  for _, g in ipairs(redis.call('XINFO', 'GROUPS', key)) do
    local name, ld = nil, nil
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] end
      if g[i] == 'last-delivered-id' then ld = g[i + 1] end
    end
    if name == group then return ld end
  end
  return nil
end
