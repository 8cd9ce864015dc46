-- Batches of BATCH (default 1000) views: POST /api/events. Bodies are built
-- once per thread; visitors are distinct within a body, so most events are
-- counted on the first pass and duplicates (still fully gated) after.
local batch = tonumber(os.getenv("BATCH") or "1000")
-- SKEW=1: article ids spread evenly over 100,000; SKEW=3 (say): a few
-- articles get most views, as real traffic does (P(id < x) = (x/N)^(1/SKEW)).
local skew = tonumber(os.getenv("SKEW") or "1")
local bodies = {}
local i = 0
local tid = 0
setup = function(thread)
  tid = tid + 1
  thread:set("tid", tid)
end
init = function()
  for b = 1, 64 do
    local parts = {}
    for e = 1, batch do
      local article = (b * batch + e) % 100000
      if skew ~= 1 then
        article = math.floor(100000 * math.random() ^ skew)
      end
      parts[e] = string.format('{"type":"view","articleId":"a%d","visitorId":"t%d-b%d-%d"}',
        article, tid, b, e)
    end
    bodies[b] = '{"events":[' .. table.concat(parts, ",") .. ']}'
  end
end
request = function()
  i = i % #bodies + 1
  return wrk.format("POST", "/api/events", {
    ["Content-Type"] = "application/json",
    ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
  }, bodies[i])
end
done = function(summary, latency, requests)
  io.write(string.format("events/s: %.0f\n", summary.requests / (summary.duration / 1e6) * batch))
end
