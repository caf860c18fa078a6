-- The shadow line (issue 15 item 2). KEYS: meta, shadow (hash visitor -> "number behind at_ms
-- rule address"), pre. The shadow line numbers from its own counter (meta `shadow_seq`), never
-- from the fans' `counter`, which it only reads: `behind` = fans numbered or pre-queued now.
-- ARGV: op ('join' visitor "at_ms rule address" | 'del' visitor).
-- Returns 'missing' for an unknown event; join: the stored entry (the old one on a repeat);
-- del: the removed entry or ''.
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local old = redis.call('HGET', KEYS[2], ARGV[2])
if ARGV[1] == 'del' then
  if not old then return '' end
  redis.call('HDEL', KEYS[2], ARGV[2])
  return old
end
if old then return old end
local seq = redis.call('HINCRBY', KEYS[1], 'shadow_seq', 1)
local counter = tonumber(redis.call('HGET', KEYS[1], 'counter') or '0') or 0
local behind = counter + redis.call('ZCARD', KEYS[3])
local entry = string.format('%d %d %s', seq, behind, ARGV[3])
redis.call('HSET', KEYS[2], ARGV[2], entry)
return entry
