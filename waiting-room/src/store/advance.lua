-- Moves the cursor. KEYS: meta, live. ARGV: n, max_active, now (epoch s), invite grace (s).
-- Returns {cursor, moved}, or {-1, 0} for an unknown event.
local m = redis.call('HMGET', KEYS[1], 'state', 'cursor', 'counter')
if not m[1] then return {-1, 0} end
local cursor = tonumber(m[2] or '0')
if m[1] ~= 'open' then return {cursor, 0} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[3])
local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[2])
if free < 0 then free = 0 end
local target = math.min(cursor + math.min(tonumber(ARGV[1]), free), tonumber(m[3] or '0'))
if target < cursor then target = cursor end
local until_ = tonumber(ARGV[3]) + tonumber(ARGV[4])
for k = cursor + 1, target do
  redis.call('ZADD', KEYS[2], until_, 'inv:' .. string.format('%d', k))
end
redis.call('HSET', KEYS[1], 'cursor', string.format('%d', target))
return {target, target - cursor}
