-- Idempotent claim (case W08). KEYS: meta, num, adm, live, hb, gone, back, jti.
-- ARGV: visitor, now (ms), ttl (s), jti, rejoin grace (ms), slot tail (s: the live entry's
-- score is exp + tail, case W10).
-- Returns {'admitted', 'jti iat exp'} | {'refused', state} | {'wait', number-or-'', cursor}
-- | {'returning', number} | {'lost', number} | {'missing'}.
local v = ARGV[1]
local a = redis.call('HGET', KEYS[3], v)
if a then return {'admitted', a} end
local m = redis.call('HMGET', KEYS[1], 'state', 'cursor')
if not m[1] then return {'missing'} end
if m[1] == 'paused' or m[1] == 'closed' or m[1] == 'sold_out' then return {'refused', m[1]} end
local n = redis.call('HGET', KEYS[2], v)
local cursor = m[2] or '0'
if not n or tonumber(n) > tonumber(cursor) then
  touch(KEYS[5], v, ARGV[2])
  return {'wait', n or '', cursor}
end
local c = come_back(KEYS[6], KEYS[7], v, ARGV[2], ARGV[5])
if c ~= 'ok' then return {c, n} end
local now = string.format('%d', math.floor(tonumber(ARGV[2]) / 1000))
-- The fan's slot is its invitation; once that lapsed, only a free slot will do (case W10):
-- otherwise the fan is first in line at the next tick, and live never exceeds max_active.
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
local invited = redis.call('ZREM', KEYS[4], 'inv:' .. n) == 1
if not invited and redis.call('ZCARD', KEYS[4]) >=
    tonumber(redis.call('HGET', KEYS[1], 'max_active') or '0') then
  redis.call('HSET', KEYS[6], v, 'r')
  redis.call('RPUSH', KEYS[7], v)
  return {'returning', n}
end
local exp = string.format('%d', tonumber(now) + tonumber(ARGV[3]))
local rec = ARGV[4] .. ' ' .. now .. ' ' .. exp
redis.call('HSET', KEYS[3], v, rec)
redis.call('HSET', KEYS[8], ARGV[4], v)
redis.call('ZADD', KEYS[4], tonumber(exp) + tonumber(ARGV[6]), v)
redis.call('HINCRBY', KEYS[1], 'admitted_total', 1)
local active = redis.call('ZCARD', KEYS[4])
if active > tonumber(redis.call('HGET', KEYS[1], 'max_active_seen') or '0') then
  redis.call('HSET', KEYS[1], 'max_active_seen', active)
end
return {'admitted', rec}
