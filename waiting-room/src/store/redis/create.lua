-- Creates an event unless it exists. KEYS: meta. ARGV: field/value pairs (with the draw seed).
-- Returns 1 if created.
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'state', 'prequeue', 'counter', '0', 'cursor', '0',
  'admitted_total', '0', 'max_active_seen', '0', unpack(ARGV))
bump_gen(KEYS[1])
return 1
