-- The booking core ends a session (idempotent). KEYS: meta, adm, live, jti.
-- ARGV: 'jti'|'visitor', id, now (s). Returns 'ended' | 'already' | 'unknown' | 'missing'.
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local v = ARGV[2]
if ARGV[1] == 'jti' then
  v = redis.call('HGET', KEYS[4], ARGV[2])
  if not v then return 'unknown' end
end
if redis.call('HEXISTS', KEYS[2], v) == 0 then return 'unknown' end
local exp = redis.call('ZSCORE', KEYS[3], v)
redis.call('ZREM', KEYS[3], v)
if exp and tonumber(exp) > tonumber(ARGV[3]) then
  redis.call('HINCRBY', KEYS[1], 'ended_total', 1)
  return 'ended'
end
return 'already'
