-- hotrank: the end of post.lua (after post_make.lua).
-- As the seed's INCR loop leaves it: the counter at the new id.
if n > high then redis.call('SET', counter, n) end
redis.call('SET', req, id, 'EX', 120)
op_done(meta)
return id
