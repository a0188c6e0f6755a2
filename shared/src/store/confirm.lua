-- Confirm tickets of one product after their MySQL transaction committed:
-- processing -> confirmed.
-- KEYS: 1 meta, 2 pending, 3.. ticket records
-- ARGV: pairs of (ticket, order id), in the order of KEYS[3..], then now (ms)
-- Returns how many tickets changed.
local changed = 0
local now = ARGV[(#KEYS - 2) * 2 + 1]
for i = 3, #KEYS do
  local ticket = ARGV[(i - 3) * 2 + 1]
  local order_id = ARGV[(i - 3) * 2 + 2]
  local status = redis.call('HGET', KEYS[i], 'status')
  if status == 'processing' then
    redis.call('HSET', KEYS[i], 'status', 'confirmed', 'order_id', order_id, 'confirmed_at', now)
    redis.call('ZREM', KEYS[2], ticket)
    redis.call('HINCRBY', KEYS[1], 'confirmed', 1)
    changed = changed + 1
  end
end
return changed
