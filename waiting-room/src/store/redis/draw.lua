-- The event's draw. KEYS: meta. ARGV: a fresh seed (hex), stored only when the event has none
-- (events created before the draw existed). Returns {} for an unknown event, else {state, seed,
-- draw_from or '', draw_n or ''}.
if redis.call('EXISTS', KEYS[1]) == 0 then return {} end
redis.call('HSETNX', KEYS[1], 'draw_seed', ARGV[1])
local m = redis.call('HMGET', KEYS[1], 'state', 'draw_seed', 'draw_from', 'draw_n')
return {m[1], m[2], m[3] or '', m[4] or ''}
