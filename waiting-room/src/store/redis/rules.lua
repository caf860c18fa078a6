-- The event's address rules (issue 15 item 2). KEYS: meta, rules (hash id -> JSON).
-- ARGV: op ('list' | 'put' id json cidr max | 'del' id). Returns 'missing' for an unknown
-- event; list: the JSON values; put: 'added', 'full' (max rules already) or 'same:' .. the JSON
-- of the rule on that range (nothing stored: the cap and one rule per range hold however many
-- operators add at once); del: the removed JSON or ''.
if redis.call('EXISTS', KEYS[1]) == 0 then return 'missing' end
local op = ARGV[1]
if op == 'list' then return redis.call('HVALS', KEYS[2]) end
if op == 'put' then
  local all = redis.call('HVALS', KEYS[2])
  for _, v in ipairs(all) do
    if cjson.decode(v)['cidr'] == ARGV[4] then return 'same:' .. v end
  end
  if #all >= tonumber(ARGV[5]) then return 'full' end
  redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
  return 'added'
end
local old = redis.call('HGET', KEYS[2], ARGV[2])
if not old then return '' end
redis.call('HDEL', KEYS[2], ARGV[2])
return old
