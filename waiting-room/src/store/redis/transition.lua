-- Compare-and-set of the state. KEYS: meta. ARGV: to, from... Returns {state after, 1 when this
-- call moved it else 0}, or {'', 0} for an unknown event. A real change bumps the generation
-- (`bump_gen`, lib.lua).
local s = redis.call('HGET', KEYS[1], 'state')
if not s then return {'', 0} end
for i = 2, #ARGV do
  if s == ARGV[i] then
    if s ~= ARGV[1] then
      redis.call('HSET', KEYS[1], 'state', ARGV[1])
      bump_gen(KEYS[1])
      return {ARGV[1], 1}
    end
    return {s, 0}
  end
end
return {s, 0}
