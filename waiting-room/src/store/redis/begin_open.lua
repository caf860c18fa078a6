-- prequeue -> opening; later joins are numbered after the whole pre-queue. KEYS: meta, pre.
-- Fans see `opening` as `open`: a public state change, so the generation is bumped.
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'prequeue' then return 0 end
local n = redis.call('SCARD', KEYS[2])
redis.call('HSET', KEYS[1], 'state', 'opening', 'shuffle_next', redis.call('HGET', KEYS[1], 'counter') or '0')
redis.call('HINCRBY', KEYS[1], 'counter', n)
bump_gen(KEYS[1])
return n
