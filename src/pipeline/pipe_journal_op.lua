-- hotrank pipeline: an API node journals one article operation (PUT,
-- post, vote, delete) on the journal's Redis (docs/design.md, "Disaster
-- recovery"), after it changed the article and before it answers.
--
-- ARGV: the journal's epoch key, the epoch of the node, the operations'
-- journal stream, then the entry's field/value pairs (ops.rs OpEntry).
-- Returns 1, or the error EPOCH (nothing journaled) when the journal
-- belongs to another epoch.
if #ARGV < 5 or #ARGV % 2 ~= 1 then
  return redis.error_reply('ERR pipe_journal_op.lua: malformed arguments')
end
if redis.call('GET', ARGV[1]) ~= ARGV[2] then
  return redis.error_reply('EPOCH the journal does not hold pipeline epoch ' .. ARGV[2])
end
redis.call('XADD', ARGV[3], '*', unpack(ARGV, 4))
return 1
