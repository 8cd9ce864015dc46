-- hotrank: the filtered newest index (keys.rs `newest_by`,
-- `articles:new:by`): one member per live article and filter value it
-- has, all of score 0 and ordered by their bytes: `c`, `k` or `g`
-- (category, kind, group), the value's length in bytes, `:`, the value,
-- 9999999999999 - publishedAt in 13 digits, the id. A value's members are
-- then one range of the set, newest first and ties by id, as
-- `GET /api/new` lists them (rank.rs `newest_page` reads it with
-- ZRANGEBYLEX). In front of put.lua, post_make.lua and delete.lua.
-- The members article `id` has while its metadata is the hash `meta`.
local function facets_of(meta, id)
  local m = redis.call('HMGET', meta, 'publishedAt', 'deleted', 'category', 'kind', 'groups')
  local out = {}
  if not m[1] or m[2] == '1' then return out end
  local at = string.format('%013d', 9999999999999 - tonumber(m[1]))
  local function add(dim, v) out[#out + 1] = dim .. #v .. ':' .. v .. at .. id end
  if m[3] then add('c', m[3]) end
  if m[4] then add('k', m[4]) end
  if m[5] then
    for _, g in ipairs(cjson.decode(m[5])) do add('g', g) end
  end
  return out
end
-- Replaces members `old` by `new` in the index `by`.
local function facets_move(by, old, new)
  if #old > 0 then redis.call('ZREM', by, unpack(old)) end
  for _, f in ipairs(new) do redis.call('ZADD', by, 0, f) end
end
