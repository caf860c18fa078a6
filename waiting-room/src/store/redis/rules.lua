-- The event's address rules (issue 15 item 2). KEYS: meta, rules (hash id -> JSON).
-- ARGV: op ('list' | 'put' id json | 'del' id). Returns 'missing' for an unknown event; list:
-- the JSON values; put: 1; del: the removed JSON or ''.
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local op = ARGV[1]
if op == 'list' then return redis.call('HVALS', KEYS[2]) end
if op == 'put' then
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  return 1
end
local old = redis.call('HGET', KEYS[2], ARGV[2])
if not old then return '' end
redis.call('HDEL', KEYS[2], ARGV[2])
return old
