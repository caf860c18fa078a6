-- "Leave the line" (issue 18 item 5). KEYS: meta, num, pre, hb, vac. ARGV: visitor, pre-queue
-- member (`{public id}:{visitor}`). A numbered fan above the cursor gives the number up: it
-- goes into `vac` (sorted set, score = member = the number), which position.lua counts with
-- ZCOUNT and advance.lua skips (and removes) as the cursor passes it; the number bucket keeps
-- its entry (the draw's record), the visitor's own `num` entry goes. A pre-queued fan leaves
-- the pre-queue. Returns {'missing'|'vacated'|'unqueued'|'not_waiting', number-or-''}.
local m = redis.call('HMGET', KEYS[1], 'state', 'cursor')
if not m[1] then return {'missing', ''} end
local v = ARGV[1]
local n = redis.call('HGET', KEYS[2], v)
if n then
  if tonumber(n) <= tonumber(m[2] or '0') then return {'not_waiting', n} end
  redis.call('HDEL', KEYS[2], v)
  redis.call('ZREM', KEYS[4], v)
  redis.call('ZADD', KEYS[5], n, n)
  return {'vacated', n}
end
if redis.call('ZREM', KEYS[3], ARGV[2]) == 1 then return {'unqueued', ''} end
return {'not_waiting', ''}
