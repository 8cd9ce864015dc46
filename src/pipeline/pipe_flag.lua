-- hotrank pipeline: after gate.lua in the filter script, each decided
-- entry goes to the flagged stream with its verdict and what apply.lua
-- needs: kind, article, visitor bytes, ts, dwell seconds, tally (its
-- article existed: quarantine is tallied on it), the batch's `now`, and
-- the raw entry's id, and the crawler family of a bot ('0' for none; the
-- quarantine report's, totals.lua), and when known the network block (the
-- review's evidence: the count worker reads a missing one as ''); and the verdict of each event with an eventId.
for i, e in ipairs(ev) do
  if e.net == '' then
    redis.call('XADD', DST, '*', 'v', verdicts[i], 'k', e.kind, 'a', e.art, 'b', e.vb,
      't', e.ts, 's', e.secs, 'g', e.tally and '1' or '0', 'n', now, 'r', e.id, 'c', e.fam)
  else
    redis.call('XADD', DST, '*', 'v', verdicts[i], 'k', e.kind, 'a', e.art, 'b', e.vb,
      't', e.ts, 's', e.secs, 'g', e.tally and '1' or '0', 'n', now, 'r', e.id, 'c', e.fam,
      'x', e.net)
  end
end
-- Refusals (no article to tally them on): per reason, for /api/stats.
local unknown, full = 0, 0
for i = 1, #ev do
  local v = tonumber(verdicts[i])
  if v == 5 then unknown = unknown + 1 elseif v == 6 then full = full + 1 end
end
if unknown > 0 then redis.call('HINCRBY', P .. 'pipe:refused', 'unknown_article', unknown) end
if full > 0 then redis.call('HINCRBY', P .. 'pipe:refused', 'too_many_articles', full) end
-- Verdicts by eventId (GET /api/events/{eventId}): counted if any copy
-- counted, else the latest copy's; kept as long as eventIds are.
local vttl = math.max(eid_ttl, 60)
for i, e in ipairs(ev) do
  if e.eid ~= '' then
    local key = P .. 'pipe:verdict:' .. e.eid
    if redis.call('GET', key) ~= '0' then
      redis.call('SET', key, verdicts[i], 'EX', vttl)
    end
  end
end
