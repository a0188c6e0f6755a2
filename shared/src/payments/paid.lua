-- An order was paid in MySQL: Redis follows, the ticket becomes `paid` (the unit stays sold).
-- MySQL has the last word, so a ticket still `processing` (a payment can commit between a
-- worker's MySQL commit and its `confirm.lua`) or `pending` (a Redis that came back old) is
-- paid too, and leaves the pending set; the worker's later `confirm.lua` only takes
-- `processing`, so it leaves a paid ticket alone.
-- A ticket with no record (Redis lost it) gets a `paid` one: the payment does not take the
-- product's row lock, so it can commit between a rebuild's read of MySQL and its restore.lua,
-- which writes the `confirmed` it read only where Redis has no settled record.
-- KEYS: 1 meta, 2 ticket record, 3 pending
-- ARGV: 1 now (ms), 2 ticket, 3 the order's id, 4 record ttl (s) for a ticket that had none,
--       5 the buyer's user id, 6 the order's quantity (MySQL's)
-- `confirmed` and `paid` count units.
-- Returns 1 when the record changed.
local r = redis.call('HMGET', KEYS[2], 'status', 'qty')
local status = r[1]
local q = tonumber(ARGV[6] or '') or tonumber(r[2] or '1')
if not status then
  redis.call('HSET', KEYS[2], 'user_id', ARGV[5], 'order_id', ARGV[3])
  if q > 1 then redis.call('HSET', KEYS[2], 'qty', q) end
  redis.call('EXPIRE', KEYS[2], ARGV[4])
elseif status == 'processing' or status == 'pending' then
  local held = tonumber(r[2] or '1')
  if redis.call('ZREM', KEYS[3], ARGV[2]) == 1 and held > 1 then
    redis.call('HINCRBY', KEYS[1], 'pending_extra', 1 - held)
  end
  redis.call('HINCRBY', KEYS[1], 'confirmed', q)
  redis.call('HSET', KEYS[2], 'order_id', ARGV[3])
  redis.call('EXPIRE', KEYS[2], ARGV[4])
elseif status ~= 'confirmed' then
  return 0
end
redis.call('HSET', KEYS[2], 'status', 'paid', 'paid_at', ARGV[1])
notify(KEYS[2])
redis.call('HINCRBY', KEYS[1], 'paid', q)
return 1
