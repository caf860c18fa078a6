-- Sets fields of an existing event only. KEYS: meta. ARGV: field/value pairs. 1 if it exists.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if #ARGV > 0 then redis.call('HSET', KEYS[1], unpack(ARGV)) end
return 1
