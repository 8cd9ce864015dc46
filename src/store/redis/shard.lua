-- hotrank: article shards (docs/redis-keys.md, "Article shards"). In front
-- of every script that names a shard's key, right after the lines that
-- set NSHARDS, the site's shard count, and STAG, the site's hash tag on a
-- Redis Cluster (nil on one Redis) (keys.rs `shard_chunk_tagged`: compiled
-- in, so no script argument changes with them). The change log, activity
-- sets, `articles:new` and rankings of shard k live under
-- `shard_prefix(P, k)`; with one shard that is the site's prefix P itself.
-- An article's own keys (counters, metadata, buckets, sketches, voters)
-- live under `AK(P, id)`: P, except on a cluster with more than one
-- shard, where they join their shard's slot (keys.rs `Keys::article`);
-- so do the copies each shard then keeps of the site's bookkeeping that
-- writes of an article touch (`stats:articles`, `archive:dirty`,
-- `archive:evicted`, `time:`, `score:`; keys.rs `Keys::ledger`), under
-- `LK(P, k)` for shard k.
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
-- The prefix of shard k's keys under the site prefix P: `<P>s<k>:` on
-- one Redis, the shard's own hash tag `{<STAG>:s<k>}` on a cluster.
local function shard_prefix(P, k)
  if NSHARDS == 1 then return P end
  if STAG then return '{' .. STAG .. ':s' .. k .. '}' end
  return P .. 's' .. k .. ':'
end
-- The prefix of article id's shard keys.
local function SK(P, id)
  return shard_prefix(P, shard_of(id))
end
-- The prefix of article id's own keys.
local function AK(P, id)
  if STAG and NSHARDS > 1 then return SK(P, id) end
  return P
end
-- Whether each shard keeps its own copy of the site's bookkeeping.
local SPLIT = STAG ~= nil and NSHARDS > 1
-- The prefix of shard k's copy of that bookkeeping (P on one slot).
local function LK(P, k)
  if SPLIT then return shard_prefix(P, k) end
  return P
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
