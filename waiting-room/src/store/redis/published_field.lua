-- Sets or clears one published field of the meta hash (`broadcast`, `mode`). KEYS: meta.
-- ARGV: field, value ('' clears). Returns {1, old value or ''}, or {0, ''} for an unknown
-- event. A change bumps the generation, so the status document carrying it is published at once.
if redis.call('EXISTS', KEYS[1]) == 0 then return {0, ''} end
local old = redis.call('HGET', KEYS[1], ARGV[1]) or ''
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
if old ~= ARGV[2] then bump_gen(KEYS[1]) end
return {1, old}
