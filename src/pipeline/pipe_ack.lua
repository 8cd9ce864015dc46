-- hotrank pipeline: the end of the filter and count scripts. The entries
-- this call applied are acknowledged in the same call as their effects.
for s = 1, #acks, 1000 do
  redis.call('XACK', SRC, GROUP, unpack(acks, s, math.min(s + 999, #acks)))
end
return { #acks, skipped }
