-- Compare-and-set of the state. KEYS: meta. ARGV: to, from... Returns the state after, or ''.
local s = redis.call('HGET', KEYS[1], 'state')
if not s then return '' end
for i = 2, #ARGV do
  if s == ARGV[i] then
    redis.call('HSET', KEYS[1], 'state', ARGV[1])
    return ARGV[1]
  end
end
return s
