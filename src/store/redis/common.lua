-- hotrank: helpers every gate/apply script shares (after its head, which
-- defines `now`).
local function ttl(expires_at)
  local t = expires_at - now
  if t < 60 then t = 60 end
  return t
end
