-- hotrank: the end of post_at.lua (after post_make.lua).
redis.call('SET', req, id, 'EX', 120)
return id
