-- hotrank: prepended to every script. When a call declares its keys
-- (KEYS, as Redis Cluster needs to route a call and to keep it right while
-- its slot moves), K() refuses any name the call did not declare, so a
-- script never touches a key its caller did not name. Scripts name every
-- key before their first write, so a refusal writes nothing. Calls without KEYS
-- (ingest on one Redis, where declaring 2,000 keys a batch only costs)
-- are not checked.
local DECLARED = nil
if #KEYS > 0 then
  DECLARED = {}
  for _, k in ipairs(KEYS) do DECLARED[k] = true end
end
local function K(name)
  if DECLARED and not DECLARED[name] then
    error('hotrank: undeclared key ' .. name)
  end
  return name
end
