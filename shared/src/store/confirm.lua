-- Confirm tickets of one product after their MySQL transaction committed:
-- processing -> confirmed.
-- KEYS: 1 meta, 2 pending, 3.. ticket records
-- ARGV: triples (ticket, order id, record ttl in s) in the order of KEYS[3..], then now (ms).
--       The record expires that long after it is confirmed (reserve.lua set none): the usual
--       TTL, and for a ticket to be paid the payment window too, so the cancel that may come
--       finds it.
-- Each ticket costs its record's reads and writes; the pending set and the `confirmed` count
-- are written once per call (ZREM in chunks that Lua's unpack can take).
-- Returns how many tickets changed.
local settled = {}
local now = ARGV[(#KEYS - 2) * 3 + 1]
for i = 3, #KEYS do
  local j = (i - 3) * 3
  local ticket, order_id, ttl = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3]
  local status = redis.call('HGET', KEYS[i], 'status')
  if status == 'processing' then
    redis.call('HSET', KEYS[i], 'status', 'confirmed', 'order_id', order_id, 'confirmed_at', now)
    redis.call('EXPIRE', KEYS[i], ttl)
    settled[#settled + 1] = ticket
  end
end
for first = 1, #settled, 1000 do
  redis.call('ZREM', KEYS[2], unpack(settled, first, math.min(first + 999, #settled)))
end
if #settled > 0 then redis.call('HINCRBY', KEYS[1], 'confirmed', #settled) end
return #settled
