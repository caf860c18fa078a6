-- A visitor's place in one read. KEYS: meta, num, adm, vac. ARGV: visitor.
-- Returns {state, cursor, number, admitted 0|1, vacated places between cursor and number}, ''
-- for a missing value. A read-only script (`no-writes`, prepended in mod.rs) so it answers at
-- the memory cap, where Redis refuses every command queued in a MULTI (case W14).
local m = redis.call('HMGET', KEYS[1], 'state', 'cursor')
local n = redis.call('HGET', KEYS[2], ARGV[1])
local between = 0
if n then
  between = redis.call('ZCOUNT', KEYS[4], '(' .. (m[2] or '0'), '(' .. n)
end
return {m[1] or '', m[2] or '', n or '', redis.call('HEXISTS', KEYS[3], ARGV[1]), between}
