-- Confirm tickets of one product after their MySQL transaction committed:
-- processing -> confirmed.
-- KEYS: 1 meta, 2 pending, 3.. ticket records
-- ARGV: triples (ticket, order id, record ttl in s or '') in the order of KEYS[3..], then now
--       (ms). A ticket to be paid keeps its record for the payment window plus the usual TTL,
--       so the cancel that may come finds it.
-- Returns how many tickets changed.
local changed = 0
local now = ARGV[(#KEYS - 2) * 3 + 1]
for i = 3, #KEYS do
  local j = (i - 3) * 3
  local ticket, order_id, ttl = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
  local status = redis.call('HGET', KEYS[i], 'status')
  if status == 'processing' then
    redis.call('HSET', KEYS[i], 'status', 'confirmed', 'order_id', order_id, 'confirmed_at', now)
    if ttl ~= '' then redis.call('EXPIRE', KEYS[i], ttl) end
    redis.call('ZREM', KEYS[2], ticket)
    redis.call('HINCRBY', KEYS[1], 'confirmed', 1)
    changed = changed + 1
  end
end
return changed
