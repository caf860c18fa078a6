-- Idempotent claim (case W08). KEYS: meta, num, adm, live. ARGV: visitor, now (s), ttl (s), jti.
-- Returns {'admitted', 'jti iat exp'} | {'refused', state} | {'wait', number-or-'', cursor}
-- | {'missing'}.
local a = redis.call('HGET', KEYS[3], ARGV[1])
if a then return {'admitted', a} end
local m = redis.call('HMGET', KEYS[1], 'state', 'cursor')
if not m[1] then return {'missing'} end
if m[1] == 'paused' or m[1] == 'closed' or m[1] == 'sold_out' then return {'refused', m[1]} end
local n = redis.call('HGET', KEYS[2], ARGV[1])
local cursor = m[2] or '0'
if not n or tonumber(n) > tonumber(cursor) then return {'wait', n or '', cursor} end
local exp = string.format('%d', tonumber(ARGV[2]) + tonumber(ARGV[3]))
local rec = ARGV[4] .. ' ' .. ARGV[2] .. ' ' .. exp
redis.call('HSET', KEYS[3], ARGV[1], rec)
redis.call('ZREM', KEYS[4], 'inv:' .. n)
redis.call('ZADD', KEYS[4], exp, ARGV[1])
redis.call('HINCRBY', KEYS[1], 'admitted_total', 1)
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[2])
local active = redis.call('ZCARD', KEYS[4])
if active > tonumber(redis.call('HGET', KEYS[1], 'max_active_seen') or '0') then
  redis.call('HSET', KEYS[1], 'max_active_seen', active)
end
return {'admitted', rec}
