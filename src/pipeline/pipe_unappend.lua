-- hotrank pipeline: takes back raw entries the journal refused
-- (docs/design.md, "Disaster recovery"): the API node answers 503, so the
-- events must not count. An entry no filter worker has read yet (after the
-- group's last delivered id) is deleted; one already read stays (and
-- counts: a client retry may count it twice).
--
-- ARGV: number of partitions m; then per partition its raw stream, the
-- number of ids c, and the ids. Returns { deleted, already read }.
local m = tonumber(ARGV[1])
local pos, deleted, read = 2, 0, 0
for _ = 1, m do
  local key, c = ARGV[pos], tonumber(ARGV[pos + 1])
  local last = last_delivered(key, 'filter') or '0-0'
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
