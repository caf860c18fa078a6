-- Access codes of an event (issue 14 item 1; store/access.rs). KEYS: meta, access (hash: mode,
-- key = promoter key JSON), codes (hash code hash -> "uses expires_ms tier"), revoked (hash visitor -> code hash),
-- tiers (hash visitor -> tier), then codeu:{hash} sets (visitors who joined with the code) of the hashes in ARGV. ARGV[1] = op.
-- Returns {'missing'} for an unknown event. Refusals of 'spend' write nothing.
if redis.call('EXISTS', KEYS[1]) == 0 then return {'missing'} end
local op = ARGV[1]
if op == 'mode' then return {redis.call('HGET', KEYS[2], 'mode') or 'open'} end
if op == 'set_mode' then
  local old = redis.call('HGET', KEYS[2], 'mode') or 'open'
  redis.call('HSET', KEYS[2], 'mode', ARGV[2])
  return {old}
end
if op == 'tier' then return {redis.call('HGET', KEYS[5], ARGV[2]) or ''} end
if op == 'set_tier' then
  redis.call('HSET', KEYS[5], ARGV[2], ARGV[3])
  return {'ok'}
end
if op == 'key' then return {redis.call('HGET', KEYS[2], 'key') or ''} end
if op == 'set_key' then
  redis.call('HSET', KEYS[2], 'key', ARGV[2])
  return {'ok'}
end
if op == 'put' then
  local added = 0
  for i = 2, #ARGV, 2 do added = added + redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 1]) end
  return {tostring(added)}
end
if op == 'revoked' then return {tostring(redis.call('HEXISTS', KEYS[4], ARGV[2]))} end
if op == 'spend' then
  local rec = redis.call('HGET', KEYS[3], ARGV[2])
  if not rec then return {'unknown'} end
  local uses, exp, tier = string.match(rec, '^(%d+) (%d+) ?(.*)$')
  local expires = tonumber(exp)
  if expires > 0 and tonumber(ARGV[4]) >= expires then return {'expired'} end
  if tonumber(uses) <= 0 then return {'used-up'} end
  redis.call('HSET', KEYS[3], ARGV[2], (tonumber(uses) - 1) .. ' ' .. exp .. ' ' .. tier)
  redis.call('SADD', KEYS[6], ARGV[3])
  return {'spent', tier}
end
if op == 'refund' then
  local rec = redis.call('HGET', KEYS[3], ARGV[2])
  if rec then
    local uses, rest = string.match(rec, '^(%d+) (.*)$')
    redis.call('HSET', KEYS[3], ARGV[2], (tonumber(uses) + 1) .. ' ' .. rest)
  end
  redis.call('SREM', KEYS[6], ARGV[3])
  return {'ok'}
end
-- revoke: ARGV[2..] hashes, KEYS[6..] their codeu sets in the same order.
local out = {'0'}
local deleted = 0
for i = 2, #ARGV do
  deleted = deleted + redis.call('HDEL', KEYS[3], ARGV[i])
  local users = KEYS[i + 4]
  for _, v in ipairs(redis.call('SMEMBERS', users)) do
    redis.call('HSET', KEYS[4], v, ARGV[i])
    out[#out + 1] = v
  end
  redis.call('DEL', users)
end
out[1] = tostring(deleted)
return out
