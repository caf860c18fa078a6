-- Numbers up to ARGV[1] uniformly random pre-queued fans (one SPOP each: a fair random pick; a
-- counted SPOP returns members in hash order). KEYS: meta, pre, num, then the number buckets
-- the caller declared (numbers.rs); stops early at a number whose bucket is not declared.
-- Returns members left.
local t = buckets(4)
local first = tonumber(redis.call('HGET', KEYS[1], 'shuffle_next') or '0')
local k = first
for _ = 1, tonumber(ARGV[1]) do
  local bucket = byn(t, k + 1)
  if not bucket then break end
  local v = redis.call('SPOP', KEYS[2])
  if not v then break end
  k = k + 1
  local ks = string.format('%d', k)
  redis.call('HSET', KEYS[3], v, ks)
  redis.call('HSET', bucket, ks, v)
end
if k > first then redis.call('HSET', KEYS[1], 'shuffle_next', string.format('%d', k)) end
local left = redis.call('SCARD', KEYS[2])
if left == 0 and redis.call('HGET', KEYS[1], 'state') == 'opening' then
  redis.call('HSET', KEYS[1], 'state', 'open')
end
return left
