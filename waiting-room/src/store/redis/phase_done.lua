-- Compare-and-set of the applied-phase marker. KEYS: meta. ARGV: from, to. 1 when moved.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local done = redis.call('HGET', KEYS[1], 'phase_done') or '0'
if done ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'phase_done', ARGV[2])
return 1
