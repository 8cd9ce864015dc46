-- hotrank pipeline: in the replay script, between gate.lua and apply.lua:
-- only the entries the archive does not include are applied, with the
-- verdict decided before the disaster when there was one.
do
  local kept, kv = {}, {}
  counted = 0
  for i, e in ipairs(ev) do
    if not e.included then
      kept[#kept + 1] = e
      kv[#kv + 1] = e.decided or verdicts[i]
      if tonumber(kv[#kv]) == 0 then counted = counted + 1 end
    end
  end
  ev, verdicts = kept, kv
end
if #ev == 0 then return { 0, 0 } end
