-- hotrank pipeline: trims one journal stream (docs/design.md, "Disaster
-- recovery"). Entries journaled before the cutoff (a journal entry id,
-- from `journal_keep_secs`) go, but never one whose raw entry id (`x`) is
-- at or past the archive's floor: the first such entry (in journal order)
-- and everything after it stay. At most `scan` entries are looked at.
--
-- ARGV: journal stream, cutoff id, floor (a raw entry id), scan. Returns
-- the number of entries dropped.
local key, cutoff, floor, scan = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local minid = cutoff
local start = '-'
local seen = 0
while seen < scan do
  local got = redis.call('XRANGE', key, start, cutoff, 'COUNT', 500)
  if #got == 0 then break end
  for _, e in ipairs(got) do
    local f = e[2]
    local x = nil
    for i = 1, #f, 2 do
      if f[i] == 'x' then x = f[i + 1] end
    end
    if not x or not id_lt(x, floor) then
      return redis.call('XTRIM', key, 'MINID', e[1])
    end
    start = '(' .. e[1]
  end
  seen = seen + #got
  minid = got[#got][1]
  if #got < 500 then
    return redis.call('XTRIM', key, 'MINID', cutoff)
  end
end
-- Scanned `scan` entries, all below the floor: drop those.
return redis.call('XTRIM', key, 'MINID', minid)
