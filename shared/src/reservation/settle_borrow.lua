-- The end of a borrow, in the buyer's home bucket. Modes (ARGV[2]):
-- * 'lent': the donors gave the order's units (its `qty`, 1 when absent): borrowing ->
--   pending, the loans counted as `borrowed`; the record loses the borrowing record's expiry,
--   as a pending record has none (reserve.lua).
-- * 'none': no bucket had a unit: borrowing -> failed (out_of_stock), the buyer free.
-- * 'voiding': the sweeper takes over a ticket left borrowing: borrowing -> voiding, so a
--   late 'lent' from its gateway can no longer succeed while the donors are voided.
-- * 'void': the donors are voided: voiding -> failed (ARGV[3], `expired` when absent), the
--   buyer free. The gateway ends so an order the buckets together could not fill (reason
--   `out_of_stock`).
-- Neither failure counts in `failed`: the buyer never had a 202 for the ticket.
-- KEYS: 1 meta, 2 pending, 3 borrowing, 4 buyers, 5 ticket record
-- ARGV: 1 ticket, 2 mode, 3 the reason for 'void' (absent: expired)
-- Returns 1 when the ticket changed (for 'voiding': when it is now voiding), else 0.
local status = redis.call('HGET', KEYS[5], 'status')
local mode = ARGV[2]
if mode == 'voiding' then
  if status == 'borrowing' then redis.call('HSET', KEYS[5], 'status', 'voiding') return 1 end
  if status == 'voiding' then return 1 end
  return 0
end
local from = 'borrowing'
if mode == 'void' then from = 'voiding' end
if status ~= from then return 0 end
redis.call('ZREM', KEYS[3], ARGV[1])
if mode == 'lent' then
  local created = redis.call('HGET', KEYS[5], 'created_at')
  redis.call('HSET', KEYS[5], 'status', 'pending')
  redis.call('PERSIST', KEYS[5])
  redis.call('ZADD', KEYS[2], created, ARGV[1])
  local q = tonumber(redis.call('HGET', KEYS[5], 'qty') or '1')
  redis.call('HINCRBY', KEYS[1], 'borrowed', q)
  if q > 1 then redis.call('HINCRBY', KEYS[1], 'pending_extra', q - 1) end
  return 1
end
local reason = 'out_of_stock'
if mode == 'void' then reason = ARGV[3] or 'expired' end
redis.call('HSET', KEYS[5], 'status', 'failed', 'reason', reason)
local user = redis.call('HGET', KEYS[5], 'user_id')
if user and redis.call('HGET', KEYS[4], user) == ARGV[1] then redis.call('HDEL', KEYS[4], user) end
return 1
