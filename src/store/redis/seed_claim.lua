-- hotrank, seed layout: the seed's post_article takes its id from
-- `INCR article:`, so an id hotrank creates (PUT, a first event) must
-- leave the counter at or past it, or the site's next post would take
-- that id and overwrite the article. Only ids INCR can give move the
-- counter: decimal without a leading zero, below the largest integer
-- (a counter there would make the site's next INCR fail).
-- seed_claim(P, id) returns 1 if it moved the counter.
local function seed_claim(P, id)
  if not id:match('^[1-9]%d*$') or #id > 19
    or (#id == 19 and id >= '9223372036854775807') then
    return 0
  end
  local counter = K(P .. 'article:')
  local n = redis.call('GET', counter) or '0'
  if not n:match('^%d+$') then n = '0' end
  n = n:gsub('^0+', '')
  if #id > #n or (#id == #n and id > n) then
    redis.call('SET', counter, id)
    return 1
  end
  return 0
end
