-- One admitter move (case W06). KEYS: meta, live, hb, gone, back, num, vac, then the number buckets
-- the caller declared (numbers.rs): the scan and the window fill stop at the first number whose
-- bucket is not declared, like at the scan limit (the next tick goes on). A vacated number
-- (`vac`, leave.lua) is skipped without an invitation and leaves `vac`, so `vac` only ever
-- holds numbers above the cursor.
-- ARGV: n, max_active, now (ms), invite grace (s), silence (ms), ready window, scan limit.
-- Returns {cursor, invited, skipped, returned}, or {-1, 0, 0, 0} for an unknown event.
local m = redis.call('HMGET', KEYS[1], 'state', 'cursor', 'counter', 'edge')
if not m[1] then return {-1, 0, 0, 0} end
local cursor = tonumber(m[2] or '0')
if m[1] ~= 'open' then return {cursor, 0, 0, 0} end
local now_ms = tonumber(ARGV[3])
local now = math.floor(now_ms / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local free = tonumber(ARGV[2]) - redis.call('ZCARD', KEYS[2])
if free < 0 then free = 0 end
local budget = math.min(tonumber(ARGV[1]), free)
local until_ = now + tonumber(ARGV[4])
local returned, moved, skipped, scanned = 0, 0, 0, 0
while returned < budget do
  local v = redis.call('LPOP', KEYS[5])
  if not v then break end
  redis.call('HDEL', KEYS[4], v)
  local q = redis.call('HGET', KEYS[6], v)
  if q then redis.call('ZADD', KEYS[2], until_, 'inv:' .. q) end
  returned = returned + 1
end
local counter = tonumber(m[3] or '0')
local limit = tonumber(ARGV[7])
local dead_before = now_ms - tonumber(ARGV[5])
local t = buckets(8)
while returned + moved < budget and cursor < counter and scanned < limit do
  local bucket = byn(t, cursor + 1)
  if not bucket then break end
  cursor = cursor + 1
  scanned = scanned + 1
  local k = string.format('%d', cursor)
  local vacated = redis.call('ZREM', KEYS[7], k) == 1
  local v = not vacated and redis.call('HGET', bucket, k)
  local seen = nil
  if v then
    seen = redis.call('ZSCORE', KEYS[3], v)
    redis.call('ZREM', KEYS[3], v)
  end
  if vacated then
    skipped = skipped + 1
  elseif seen and tonumber(seen) < dead_before then
    redis.call('HSET', KEYS[4], v, ARGV[3])
    skipped = skipped + 1
  else
    redis.call('ZADD', KEYS[2], until_, 'inv:' .. k)
    moved = moved + 1
  end
end
if skipped > 0 then redis.call('HINCRBY', KEYS[1], 'skipped_total', skipped) end
local win = tonumber(ARGV[6])
local edge = tonumber(m[4] or '0')
local from = math.max(edge, cursor)
local to = math.min(cursor + win, counter, from + limit)
for k = from + 1, to do
  local bucket = byn(t, k)
  if not bucket then
    to = k - 1
    break
  end
  local ks = string.format('%d', k)
  local v = redis.call('HGET', bucket, ks)
  if v and not redis.call('ZSCORE', KEYS[7], ks) then redis.call('ZADD', KEYS[3], ARGV[3], v) end
end
redis.call('HSET', KEYS[1], 'cursor', string.format('%d', cursor), 'win', ARGV[6],
  'edge', string.format('%d', math.max(edge, to)))
return {cursor, moved, skipped, returned}
