-- hotrank: the end of ingest.lua's script: verdicts and, for a single
-- event, its article's lifetime PV and UV; remembered under the batch id.
local out = {}
for i, e in ipairs(ev) do
  out[#out + 1] = verdicts[i]
  if with_counts and arts[e.art].exists and verdicts[i] ~= 5 and verdicts[i] ~= 6 then
    out[#out + 1] = tonumber(redis.call('GET', AK(P, e.art) .. 'counter:views:' .. e.art) or '0')
    out[#out + 1] = redis.call('PFCOUNT', AK(P, e.art) .. 'hll:uv:' .. e.art)
  else
    out[#out + 1] = 0
    out[#out + 1] = 0
  end
end
if batch_key then
  -- (Through nstr: table.concat would format every number anew. An
  -- event's three numbers are one piece, and a verdict without counts
  -- the same piece each time.)
  local txt, plain = {}, {}
  for i = 1, #ev do
    local v, pv, uv = out[3 * i - 2], out[3 * i - 1], out[3 * i]
    if pv == 0 and uv == 0 then
      local t = plain[v]
      if not t then
        t = nstr(v) .. ',0,0'
        plain[v] = t
      end
      txt[i] = t
    else
      txt[i] = nstr(v) .. ',' .. nstr(pv) .. ',' .. nstr(uv)
    end
  end
  redis.call('SET', batch_key, table.concat(txt, ','), 'EX', BATCH_TTL)
end
return out
