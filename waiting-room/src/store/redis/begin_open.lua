-- prequeue -> opening; later joins are numbered after the whole pre-queue. KEYS: meta, pre.
-- Records the draw's range (`draw_from`, `draw_n`: the numbers the pre-queue gets) for its
-- publication. Fans see `opening` as `open`: a public state change, so the generation is bumped.
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'prequeue' then return 0 end
local n = redis.call('ZCARD', KEYS[2])
local c = tonumber(redis.call('HGET', KEYS[1], 'counter') or '0')
redis.call('HSET', KEYS[1], 'state', 'opening', 'shuffle_next', string.format('%d', c),
  'draw_from', string.format('%d', c + 1), 'draw_n', string.format('%d', n))
redis.call('HINCRBY', KEYS[1], 'counter', n)
bump_gen(KEYS[1])
return n
