-- A fan's sign of life. KEYS: meta, num, hb, gone, back, adm. ARGV: visitor, now (ms), rejoin (ms).
-- Returns {state, number-or-'', cursor, place} | {'missing'}.
local m = redis.call('HMGET', KEYS[1], 'state', 'cursor')
if not m[1] then return {'missing'} end
local cursor = m[2] or '0'
local v = ARGV[1]
local n = redis.call('HGET', KEYS[2], v)
local place
if not n then
  place = 'unnumbered'
elseif redis.call('HEXISTS', KEYS[6], v) == 1 then
  place = 'admitted'
else
  local c = come_back(KEYS[4], KEYS[5], v, ARGV[2], ARGV[3])
  if c ~= 'ok' then
    place = c
  elseif tonumber(n) <= tonumber(cursor) then
    place = 'your_turn'
  elseif touch(KEYS[3], v, ARGV[2]) then
    place = 'ready'
  else
    place = 'waiting'
  end
end
return {m[1], n or '', cursor, place}
