-- Compare-and-set of the state. KEYS: meta. ARGV: to, from... Returns the state after, or ''.
-- A real change bumps the generation (`bump_gen`, lib.lua).
local s = redis.call('HGET', KEYS[1], 'state')
if not s then return '' end
for i = 2, #ARGV do
  if s == ARGV[i] then
    if s ~= ARGV[1] then
      redis.call('HSET', KEYS[1], 'state', ARGV[1])
      bump_gen(KEYS[1])
    end
    return ARGV[1]
  end
end
return s
