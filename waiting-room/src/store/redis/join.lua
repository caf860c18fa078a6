-- Join with NX semantics (case W05). KEYS: meta, num, pre, byn, hb, gone, back.
-- ARGV: visitor, now (ms), rejoin grace (ms).
-- Returns {state, number-or-''}; numbers travel as the stored integer strings (exact).
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'missing', ''} end
local v = ARGV[1]
local open = state == 'opening' or state == 'open' or state == 'paused'
local n = redis.call('HGET', KEYS[2], v)
if n then
  local c = come_back(KEYS[6], KEYS[7], v, ARGV[2], ARGV[3])
  if c ~= 'lost' or not open then
    touch(KEYS[5], v, ARGV[2])
    return {state, n}
  end
  -- Back too late: the old place is gone, a new one at the back.
  redis.call('HDEL', KEYS[6], v)
else
  if state == 'closed' or state == 'sold_out' then return {state, ''} end
  if redis.call('SISMEMBER', KEYS[3], v) == 1 then return {state, ''} end
  if state == 'prequeue' then
    redis.call('SADD', KEYS[3], v)
    return {state, ''}
  end
end
local c = redis.call('HINCRBY', KEYS[1], 'counter', 1)
local cs = string.format('%d', c)
redis.call('HSET', KEYS[2], v, cs)
redis.call('HSET', byn_key(KEYS[4], c), cs, v)
local m = redis.call('HMGET', KEYS[1], 'cursor', 'win', 'edge')
local win = tonumber(m[2] or '0')
if win > 0 and c <= tonumber(m[1] or '0') + win then
  redis.call('ZADD', KEYS[5], ARGV[2], v)
  if c > tonumber(m[3] or '0') then redis.call('HSET', KEYS[1], 'edge', cs) end
end
return {state, cs}
