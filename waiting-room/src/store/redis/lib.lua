-- Shared helpers, prepended to scripts that need them.
-- A skipped fan shows a sign of life. KEYS-free: gone (hash), back (list) passed in.
-- Returns 'ok' (not skipped), 'returning' (back in time, queued for the next tick) or 'lost'.
local function come_back(gone, back, v, now, rejoin)
  local g = redis.call('HGET', gone, v)
  if not g then return 'ok' end
  if g == 'r' then return 'returning' end
  if tonumber(now) - tonumber(g) <= tonumber(rejoin) then
    redis.call('HSET', gone, v, 'r')
    redis.call('RPUSH', back, v)
    return 'returning'
  end
  return 'lost'
end
-- A fan in the ready window shows a sign of life (no-op outside the window: presumed live).
local function touch(hb, v, now)
  if redis.call('ZSCORE', hb, v) then
    redis.call('ZADD', hb, now, v)
    return true
  end
  return false
end
-- A state change: the event's generation becomes max(gen + 1, Redis time in ms), so it only
-- grows, also across a store that was emptied and refilled (status documents carry it).
local function bump_gen(meta)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local g = tonumber(redis.call('HGET', meta, 'gen') or '0') + 1
  if now > g then g = now end
  redis.call('HSET', meta, 'gen', string.format('%d', g))
end
-- Number -> visitor lives in buckets of 100 numbers (`…:byn:{k div 100}`), each a small hash
-- Redis keeps as a listpack (~40 B per fan instead of ~96 B as one entry of a big hash table).
-- A script touches only the bucket keys its caller declared, in KEYS from index `first` on
-- (numbers.rs works out which): Redis Cluster checks declared keys only, so a derived key could
-- sit on the far side of a half-migrated slot. The buckets share the event's {hash tag}.
local function buckets(first)
  local t = {}
  for i = first, #KEYS do
    t[tonumber(string.match(KEYS[i], ':(%d+)$'))] = KEYS[i]
  end
  return t
end
-- The declared bucket key of number k, or nil (the script then stops before it).
local function byn(t, k)
  return t[math.floor(tonumber(k) / 100)]
end
