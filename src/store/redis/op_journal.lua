-- hotrank pipeline: in front of put.lua, post.lua, vote.lua and
-- delete.lua on a node with a journal (docs/design.md, "Disaster
-- recovery"), with op_journal_end.lua after them. The operation runs
-- only while Redis holds the node's pipeline epoch, and one that changes
-- an article (`op_done`, called at its writes) is numbered: the
-- article's `ops` field (in meta:article:<id>, read with its state by the
-- archive writer) is incremented, and the reply carries that number and
-- Redis's time, which the node journals with the operation's arguments.
--
-- Three more ARGV after the operation's own (taken off here): the epoch
-- key ('' in a replay: no check), the epoch, and for a post replayed
-- from the journal the id it had ('' otherwise).
-- Reply: { the operation's reply, its number (0: nothing changed), time
-- (ms) }, or the error EPOCH (nothing written).
local OP_AT = table.remove(ARGV)
local OP_EPOCH = table.remove(ARGV)
local OP_EPOCH_KEY = table.remove(ARGV)
local OP_REFUSED = epoch_refusal(OP_EPOCH_KEY, OP_EPOCH)
if OP_REFUSED then return OP_REFUSED end
local OP = { seq = 0, t = '0' }
local function op_done(meta)
  OP.seq = redis.call('HINCRBY', meta, 'ops', 1)
  local tm = redis.call('TIME')
  OP.t = tostring(tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000))
end
local function op_body()
