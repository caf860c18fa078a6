-- Numbers up to ARGV[1] pre-queued fans in draw order: `pre` is a sorted set scored by the
-- draw rank with members `{public id}:{visitor}` (`crate::draw`), so ZPOPMIN takes the lowest
-- rank, ties by public id. KEYS: meta, pre, num, then the number buckets the caller declared
-- (numbers.rs); stops early at a number whose bucket is not declared. Returns members left.
local t = buckets(4)
local first = tonumber(redis.call('HGET', KEYS[1], 'shuffle_next') or '0')
local k = first
for _ = 1, tonumber(ARGV[1]) do
  local bucket = byn(t, k + 1)
  if not bucket then break end
  local popped = redis.call('ZPOPMIN', KEYS[2])
  if #popped == 0 then break end
  local v = string.sub(popped[1], (string.find(popped[1], ':', 1, true)) + 1)
  k = k + 1
  local ks = string.format('%d', k)
  redis.call('HSET', KEYS[3], v, ks)
  redis.call('HSET', bucket, ks, v)
end
if k > first then redis.call('HSET', KEYS[1], 'shuffle_next', string.format('%d', k)) end
local left = redis.call('ZCARD', KEYS[2])
if left == 0 and redis.call('HGET', KEYS[1], 'state') == 'opening' then
  redis.call('HSET', KEYS[1], 'state', 'open')
end
return left
