-- hotrank pipeline: the gate's settings, ARGV[1..11] of the filter and
-- replay scripts (IngestPipeline::gate_header): prefix, dedupe window (s),
-- visitor limit, ip limit, eventId TTL (s), hourly keep (s), daily keep
-- (s), require_known (0/1), max articles, behaviour limit, behaviour
-- quarantine (ms).
local P = ARGV[1]
local window = tonumber(ARGV[2])
local vlimit = tonumber(ARGV[3])
local iplimit = tonumber(ARGV[4])
local eid_ttl = tonumber(ARGV[5])
local hkeep = tonumber(ARGV[6])
local dkeep = tonumber(ARGV[7])
local require_known = ARGV[8] == '1'
local max_articles = tonumber(ARGV[9])
local bot_n = tonumber(ARGV[10])
local bot_ms = tonumber(ARGV[11])
local gate_args_ok = window and vlimit and iplimit and eid_ttl and hkeep and dkeep
  and max_articles and bot_n and bot_ms
