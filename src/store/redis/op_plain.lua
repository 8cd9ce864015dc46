-- hotrank: in front of put.lua, post.lua, vote.lua and delete.lua on a
-- store without a journal: an operation is not numbered (op_journal.lua
-- numbers them).
local OP_AT = ''
local function op_done(meta) end
