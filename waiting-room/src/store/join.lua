-- Join with NX semantics (case W05). KEYS: meta, num, pre. ARGV: visitor.
-- Returns {state, number-or-''}; numbers travel as the stored integer strings (exact).
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'missing', ''} end
local n = redis.call('HGET', KEYS[2], ARGV[1])
if n then return {state, n} end
if state == 'closed' or state == 'sold_out' then return {state, ''} end
if redis.call('SISMEMBER', KEYS[3], ARGV[1]) == 1 then return {state, ''} end
if state == 'prequeue' then
  redis.call('SADD', KEYS[3], ARGV[1])
  return {state, ''}
end
local c = redis.call('HINCRBY', KEYS[1], 'counter', 1)
redis.call('HSET', KEYS[2], ARGV[1], c)
return {state, redis.call('HGET', KEYS[2], ARGV[1])}
