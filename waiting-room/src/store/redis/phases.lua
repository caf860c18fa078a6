-- Sets or clears the event's schedule. KEYS: meta. ARGV: phases JSON ('' clears), opens_at ('' =
-- unchanged). Resets the applied-phase marker. Returns {1, old JSON or ''}, {0, ''} if unknown.
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, ''} end
local old = redis.call('HGET', KEYS[1], 'phases') or ''
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'phases')
else
  redis.call('HSET', KEYS[1], 'phases', ARGV[1])
end
redis.call('HSET', KEYS[1], 'phase_done', '0')
if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'opens_at', ARGV[2]) end
return {1, old}
