-- Single views: POST /api/views, each with a fresh visitor over 100,000 articles.
local n = 0
local threads = 0
-- Each thread gets its own number as the global `tid` (a local `tid`
-- would shadow it: every thread would send the same visitors, and half
-- the views would be duplicates).
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
request = function()
  n = n + 1
  local body = string.format('{"articleId":"a%d","visitorId":"t%d-v%d"}', n % 100000, tid, n)
  return wrk.format("POST", "/api/views", {
    ["Content-Type"] = "application/json",
    ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
  }, body)
end
