-- Join with NX semantics (case W05). KEYS: meta, num, pre, hb, gone, back, then the number
-- buckets the caller declared (numbers.rs). ARGV: visitor, now (ms), rejoin grace (ms), the
-- visitor's draw rank and pre-queue member (`crate::draw`: `{public id}:{visitor}`); `pre` is a
-- sorted set scored by rank, so opening pops it in draw order.
-- Returns {state, number-or-''}; numbers travel as the stored integer strings (exact). When the
-- next number's bucket is not declared, writes nothing and returns {'retry', next number}.
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'missing', ''} end
local v = ARGV[1]
local open = state == 'opening' or state == 'open' or state == 'paused'
local n = redis.call('HGET', KEYS[2], v)
if n then
  local c = come_back(KEYS[5], KEYS[6], v, ARGV[2], ARGV[3])
  if c ~= 'lost' or not open then
    touch(KEYS[4], v, ARGV[2])
    return {state, n}
  end
else
  if state == 'closed' or state == 'sold_out' then return {state, ''} end
  if redis.call('ZSCORE', KEYS[3], ARGV[5]) then return {state, ''} end
  if state == 'prequeue' then
    redis.call('ZADD', KEYS[3], ARGV[4], ARGV[5])
    return {state, ''}
  end
end
local nxt = tonumber(redis.call('HGET', KEYS[1], 'counter') or '0') + 1
local bucket = byn(buckets(7), nxt)
if not bucket then return {'retry', string.format('%d', nxt)} end
-- Back too late: the old place is gone, a new one at the back.
if n then redis.call('HDEL', KEYS[5], v) end
local c = redis.call('HINCRBY', KEYS[1], 'counter', 1)
local cs = string.format('%d', c)
redis.call('HSET', KEYS[2], v, cs)
redis.call('HSET', bucket, cs, v)
local m = redis.call('HMGET', KEYS[1], 'cursor', 'win', 'edge')
local win = tonumber(m[2] or '0')
if win > 0 and c <= tonumber(m[1] or '0') + win then
  redis.call('ZADD', KEYS[4], ARGV[2], v)
  if c > tonumber(m[3] or '0') then redis.call('HSET', KEYS[1], 'edge', cs) end
end
return {state, cs}
