-- Seed 003 votes: POST /api/articles/v<k>/vote over ARTICLES articles
-- (default 200, PUT beforehand), each request a fresh userId (so every
-- vote is counted), with the admin token in ADMIN (trusted: no IP budget).
local n = 0
local tid = 0
local articles = tonumber(os.getenv("ARTICLES") or "200")
local token = os.getenv("ADMIN") or ""
setup = function(thread)
  tid = tid + 1
  thread:set("tid", tid)
end
request = function()
  n = n + 1
  local body = string.format('{"userId":"t%d-u%d","direction":"up"}', tid, n)
  return wrk.format("POST", string.format("/api/articles/v%d/vote", n % articles), {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer " .. token,
  }, body)
end
