-- Sets or clears the broadcast message. KEYS: meta. ARGV: the message as JSON, '' to clear.
-- Returns {1, old JSON or ''}, or {0, ''} for an unknown event. A change bumps the generation.
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, ''} end
local old = redis.call('HGET', KEYS[1], 'broadcast') or ''
if ARGV[1] == '' then
  redis.call('HDEL', KEYS[1], 'broadcast')
else
  redis.call('HSET', KEYS[1], 'broadcast', ARGV[1])
end
if old ~= ARGV[1] then bump_gen(KEYS[1]) end
return {1, old}
