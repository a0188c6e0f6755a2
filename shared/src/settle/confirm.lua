-- Confirm tickets of one product after their MySQL transaction committed:
-- processing -> confirmed.
-- KEYS: 1 meta, 2 pending, 3.. ticket records
-- ARGV: quadruples (ticket, order id, record ttl in s, payment deadline in ms or '' for none)
--       in the order of KEYS[3..], then now (ms).
--       The record expires that long after it is confirmed (a record in flight has none):
--       the usual TTL, and for a ticket to be paid the payment window too, so the cancel that
--       may come finds it. The deadline only rides the change's message (notify.lua): MySQL
--       holds it.
-- The records are read first, then the pending set and the `confirmed` count are written once
-- per call (ZREM in chunks that Lua's unpack can take), then the records: a call that fails
-- on a damaged key fails before it confirms anything, and a retry finds the same tickets
-- still `processing`.
-- `confirmed` counts units: each ticket's `qty` (1 when it has none); the units beyond one
-- leave the meta's `pending_extra` with the ticket.
-- Returns how many tickets changed.
-- settled: the keys' positions; tickets: their tickets (a ticket listed twice counts once).
local settled, tickets, seen = {}, {}, {}
local units = 0
local now = ARGV[(#KEYS - 2) * 4 + 1]
for i = 3, #KEYS do
  local ticket = ARGV[(i - 3) * 4 + 1]
  local r = redis.call('HMGET', KEYS[i], 'status', 'qty')
  if not seen[ticket] and r[1] == 'processing' then
    seen[ticket] = true
    units = units + tonumber(r[2] or '1')
    local n = #settled + 1
    settled[n], tickets[n] = i, ticket
  end
end
if #settled == 0 then return 0 end
for first = 1, #tickets, 1000 do
  redis.call('ZREM', KEYS[2], unpack(tickets, first, math.min(first + 999, #tickets)))
end
redis.call('HINCRBY', KEYS[1], 'confirmed', units)
if units > #settled then redis.call('HINCRBY', KEYS[1], 'pending_extra', #settled - units) end
for _, i in ipairs(settled) do
  local j = (i - 3) * 4
  redis.call('HSET', KEYS[i], 'status', 'confirmed', 'order_id', ARGV[j + 2], 'confirmed_at', now)
  redis.call('EXPIRE', KEYS[i], ARGV[j + 3])
  notify(KEYS[i], 'pay_by', ARGV[j + 4])
end
return #settled
