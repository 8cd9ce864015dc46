-- Seed 003 votes: POST /api/articles/v<k>/vote over ARTICLES articles
-- (default 200, PUT beforehand), each request a fresh userId (so every
-- vote is counted), with the admin token in ADMIN (trusted: no IP budget).
local n = 0
local threads = 0
local articles = tonumber(os.getenv("ARTICLES") or "200")
local token = os.getenv("ADMIN") or ""
-- Each thread gets its own number as the global `tid` (a local would
-- shadow it: every thread would send the same userIds).
setup = function(thread)
  threads = threads + 1
  thread:set("tid", threads)
end
request = function()
  n = n + 1
  local body = string.format('{"userId":"t%d-u%d","direction":"up"}', tid, n)
  return wrk.format("POST", string.format("/api/articles/v%d/vote", n % articles), {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. token,
  }, body)
end
