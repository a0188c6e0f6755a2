-- Confirm tickets of one product after their MySQL transaction committed:
-- processing -> confirmed. A confirmed ticket's Kafka location (kept for the sweeper) is no
-- longer needed, and leaves the bucket's locations.
-- KEYS: 1 meta, 2 pending, 3 locations (ticket -> partition:offset), 4.. ticket records
-- ARGV: triples (ticket, order id, record ttl in s or '') in the order of KEYS[4..], then now
--       (ms). A ticket to be paid keeps its record for the payment window plus the usual TTL,
--       so the cancel that may come finds it.
-- Returns how many tickets changed.
local changed = 0
local now = ARGV[(#KEYS - 3) * 3 + 1]
local settled = {}
for i = 4, #KEYS do
  local j = (i - 4) * 3
  local ticket, order_id, ttl = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
  local status = redis.call('HGET', KEYS[i], 'status')
  if status == 'processing' then
    redis.call('HSET', KEYS[i], 'status', 'confirmed', 'order_id', order_id, 'confirmed_at', now)
    if ttl ~= '' then redis.call('EXPIRE', KEYS[i], ttl) end
    redis.call('ZREM', KEYS[2], ticket)
    redis.call('HINCRBY', KEYS[1], 'confirmed', 1)
    changed = changed + 1
    settled[#settled + 1] = ticket
  end
end
if #settled > 0 then redis.call('HDEL', KEYS[3], unpack(settled)) end
return changed
