-- Seed 000's per-view script: the baseline hotrank's Redis figures are
-- measured against. The Redis calls and the formula are the ones seed 000's
-- document gives ("原子更新脚本", Redis 6): PV INCRBY, PFADD + PFCOUNT,
-- HGET publishedAt, TIME, score = (alpha*pv + beta*uv) / (hours + base)^gamma,
-- ZADD. Written out here so the benchmarks need nothing outside the
-- repository.
-- KEYS: counter:views:A  hll:uv:A  hot:score  meta:article:A
-- ARGV: A  V  alpha  beta  base  gamma   (the benches send A V 1.0 1.2 2 1.5)
local article, visitor = ARGV[1], ARGV[2]
local alpha, beta = tonumber(ARGV[3]), tonumber(ARGV[4])
local base, gamma = tonumber(ARGV[5]), tonumber(ARGV[6])

local pv = redis.call('INCRBY', KEYS[1], 1)
redis.call('PFADD', KEYS[2], visitor)
local uv = redis.call('PFCOUNT', KEYS[2])

local published = tonumber(redis.call('HGET', KEYS[4], 'publishedAt') or 0) or 0
local now = tonumber(redis.call('TIME')[1])
local hours = 0
if published > 0 and now > published then
  hours = (now - published) / 3600.0
end

local score = 0
local divisor = math.pow(hours + base, gamma)
if divisor > 0 then
  score = (alpha * pv + beta * uv) / divisor
end
redis.call('ZADD', KEYS[3], score, article)
return { pv, uv, score }
