-- hotrank pipeline: the first chunk of the filter and count scripts.
-- Whether entry `id` of `src` is still to be processed by this call: not
-- yet seen in it, and pending in `group` (an entry no longer pending was
-- acknowledged by the call that processed it: docs/design.md, "Pipeline").
local function undone(src, group, id, seen)
  if seen[id] or #redis.call('XPENDING', src, group, id, id, 1) ~= 1 then
    return false
  end
  seen[id] = true
  return true
end
