-- hotrank pipeline: the first chunk of the filter and count scripts.
-- Whether entry `id` of `src` is still to be processed by this call: not
-- yet seen in it, and pending in `group` (an entry no longer pending was
-- acknowledged by the call that processed it: docs/design.md, "Pipeline").
--
-- `pending_among` asks once per call, not once per entry: one XPENDING
-- over the range from the call's lowest id to its highest (the pending
-- list is kept in id order), with a reply of at most twice the call's
-- entries plus 64. When the reply is that long, entries it does not name
-- may still be pending further on: `undone` asks for each of those alone.
local pending, pending_cut = nil, false

-- An entry id's two numbers, or nil when it is not one.
local function id_parts(id)
  local ms, seq = string.match(id, '^(%d+)%-(%d+)$')
  return tonumber(ms), tonumber(seq)
end

-- Reads the pending entries among the call's `n` ids, which are
-- A[first], A[first + stride], ... Leaves `pending` nil (every entry asked
-- alone, as before) when an id is malformed: the per-entry XPENDING
-- reports it.
local function pending_among(src, group, A, first, stride, n)
  local lo, lo_ms, lo_seq, hi, hi_ms, hi_seq
  for i = 0, n - 1 do
    local id = A[first + i * stride]
    local ms, seq = id_parts(id)
    if not (ms and seq) then return end
    if not lo or ms < lo_ms or (ms == lo_ms and seq < lo_seq) then
      lo, lo_ms, lo_seq = id, ms, seq
    end
    if not hi or ms > hi_ms or (ms == hi_ms and seq > hi_seq) then
      hi, hi_ms, hi_seq = id, ms, seq
    end
  end
  if not lo then return end
  local limit = 2 * n + 64
  local reply = redis.call('XPENDING', src, group, lo, hi, limit)
  pending = {}
  for _, p in ipairs(reply) do pending[p[1]] = true end
  pending_cut = #reply >= limit
end

local function undone(src, group, id, seen)
  if seen[id] then return false end
  if not (pending and pending[id]) then
    if pending and not pending_cut then return false end
    if #redis.call('XPENDING', src, group, id, id, 1) ~= 1 then return false end
  end
  seen[id] = true
  return true
end
