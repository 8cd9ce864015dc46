-- hotrank: in front of put.lua, post.lua, vote.lua and delete.lua on a
-- store without a journal: an operation is not numbered (op_journal.lua
-- numbers them). Two more ARGV after the operation's own (taken off
-- here): the epoch key and the node's epoch ('' no check, epoch.lua).
local OP_EPOCH = table.remove(ARGV)
local OP_EPOCH_KEY = table.remove(ARGV)
local OP_REFUSED = epoch_refusal(OP_EPOCH_KEY, OP_EPOCH)
if OP_REFUSED then return OP_REFUSED end
local OP_AT = ''
local function op_done(meta) end
