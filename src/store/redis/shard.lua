-- hotrank: article shards (docs/redis-keys.md, "Article shards"). In front
-- of every script that names a shard's key, right after the line that
-- sets NSHARDS, the site's shard count (keys.rs `shard_chunk`: compiled
-- in, so no script argument changes with it). The change log, activity
-- sets, `articles:new` and rankings of shard k live under
-- `shard_prefix(P, k)`; with one shard that is the site's prefix P itself.
--
-- shard_of must equal keys.rs `shard_of` (a test runs both): a polynomial
-- hash of the id's bytes (x 31, mod 2^31 - 1), mod NSHARDS. Every value
-- stays below 2^36, exact in Lua's doubles.
local SHARD_OF = {}
local function shard_of(id)
  if NSHARDS == 1 then return 0 end
  local s = SHARD_OF[id]
  if s then return s end
  local h = 0
  for i = 1, #id do h = (h * 31 + string.byte(id, i)) % 2147483647 end
  s = h % NSHARDS
  SHARD_OF[id] = s
  return s
end
-- The prefix of shard k's keys under the site prefix P.
local function shard_prefix(P, k)
  if NSHARDS == 1 then return P end
  return P .. 's' .. k .. ':'
end
-- The prefix of article id's shard keys.
local function SK(P, id)
  return shard_prefix(P, shard_of(id))
end
-- `ids` by shard: a table shard -> its ids (in the order given), and the
-- shards in order of their first id.
local function by_shard(ids)
  local by, order = {}, {}
  for _, id in ipairs(ids) do
    local k = shard_of(id)
    local l = by[k]
    if not l then l = {}; by[k] = l; order[#order + 1] = k end
    l[#l + 1] = id
  end
  return by, order
end
