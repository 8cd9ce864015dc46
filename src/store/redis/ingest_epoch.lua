-- hotrank: in front of ingest.lua on the direct store: ARGV[1..2] are the
-- epoch key and the node's epoch ('' no check, epoch.lua), taken off
-- here, so ingest.lua's own arguments follow.
local INGEST_EPOCH_KEY = table.remove(ARGV, 1)
local INGEST_EPOCH = table.remove(ARGV, 1)
local INGEST_REFUSED = epoch_refusal(INGEST_EPOCH_KEY, INGEST_EPOCH)
if INGEST_REFUSED then return INGEST_REFUSED end
