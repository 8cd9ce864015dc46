end
-- hotrank pipeline: after the operation's body (op_journal.lua).
local reply = op_body()
return { reply, OP.seq, OP.t }
