-- hotrank: the site's epoch marker (marker.rs; docs/design.md, "Disaster
-- recovery"). A node learns its site's epoch once (from `pipe:epoch`),
-- and every call that writes for it carries that epoch: the call runs
-- only while Redis still holds it, so a Redis that lost its data (a
-- restart without persistence, FLUSHALL, a lost disk) refuses the call
-- before any write, instead of counting again what it forgot.
--
-- epoch_refusal(key, epoch): nil when `epoch` is '' (no check) or `key`
-- holds it, else the error EPOCH to return (nothing written).
local function epoch_refusal(key, epoch)
  if epoch ~= '' and redis.call('GET', K(key)) ~= epoch then
    return redis.error_reply('EPOCH Redis does not hold epoch ' .. tostring(epoch))
  end
  return nil
end
