-- Numbers up to ARGV[1] uniformly random pre-queued fans (one SPOP each: a fair random pick; a
-- counted SPOP returns members in hash order). KEYS: meta, pre, num, byn (bucket prefix).
-- Returns members left.
local max = tonumber(ARGV[1])
for _ = 1, max do
  local v = redis.call('SPOP', KEYS[2])
  if not v then break end
  local k = redis.call('HINCRBY', KEYS[1], 'shuffle_next', 1)
  redis.call('HSET', KEYS[3], v, k)
  redis.call('HSET', byn_key(KEYS[4], k), string.format('%d', k), v)
end
local left = redis.call('SCARD', KEYS[2])
if left == 0 and redis.call('HGET', KEYS[1], 'state') == 'opening' then
  redis.call('HSET', KEYS[1], 'state', 'open')
end
return left
