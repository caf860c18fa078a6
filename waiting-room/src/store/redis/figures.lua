-- All live figures in one read. KEYS: meta, pre, live, hb, back, vac. ARGV: now (s), dead before (ms).
-- Returns {meta as a flat field/value array, prequeued, active, silent, returning, left}. Read-only
-- (`no-writes`, prepended in mod.rs) so it answers at the memory cap (case W14).
return {
  redis.call('HGETALL', KEYS[1]),
  redis.call('ZCARD', KEYS[2]),
  redis.call('ZCOUNT', KEYS[3], '(' .. ARGV[1], '+inf'),
  redis.call('ZCOUNT', KEYS[4], '-inf', '(' .. ARGV[2]),
  redis.call('LLEN', KEYS[5]),
  redis.call('ZCARD', KEYS[6]),
}
