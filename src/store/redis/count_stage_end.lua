-- hotrank: the end of count_stage.lua (after apply.lua).
redis.call('SET', done_key, '1', 'EX', 86400)
return 1
