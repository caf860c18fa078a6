-- Transition latch of the status document. KEYS: latch hash (field per state -> generation,
-- `top` -> highest generation latched). ARGV: public state, generation. The first caller to
-- see a newer generation wins (returns 1): it sets this state's latch and clears the others'
-- (the state changed back, e.g. a freed seat reopened a sold-out event). Older or equal
-- generations lose (0), so each transition publishes exactly once across processes.
local top = tonumber(redis.call('HGET', KEYS[1], 'top') or '-1')
local gen = tonumber(ARGV[2])
if gen <= top then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'top', ARGV[2], ARGV[1], ARGV[2])
return 1
