-- POST /api/events batches shaped like seqbench's dedupe stream: article
-- ids uniform over ARTICLES (default 10000, printed %012d as seqbench does),
-- visitors uniform over VISITORS (default 1e9: nearly every pair is new),
-- fresh for every request. BATCH events per request (default 1000).
local batch = tonumber(os.getenv("BATCH") or "1000")
local articles = tonumber(os.getenv("ARTICLES") or "10000")
local visitors = tonumber(os.getenv("VISITORS") or "1000000000")
local tid = 0
setup = function(thread)
  tid = tid + 1
  thread:set("tid", tid)
end
init = function()
  math.randomseed(7919 * (tid or 1) + os.time())
end
local headers = {
  ["Content-Type"] = "application/json",
  ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
}
request = function()
  local parts = {}
  for e = 1, batch do
    parts[e] = string.format('{"type":"view","articleId":"%012d","visitorId":"v%d"}',
      math.random(0, articles - 1), math.random(0, visitors - 1))
  end
  return wrk.format("POST", "/api/events", headers, '{"events":[' .. table.concat(parts, ",") .. ']}')
end
response = function(status, headers, body)
  if status ~= 200 then
    errors_seen = (errors_seen or 0) + 1
  end
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT events_per_s=%.0f requests=%d non2xx=%d\n",
    summary.requests / (summary.duration / 1e6) * batch, summary.requests,
    summary.errors.status))
end
