-- An order was cancelled in MySQL (not paid in time, or by its buyer), whose commit also put
-- the unit back in MySQL's stock. Make Redis follow, once: the ticket becomes `cancelled`, the
-- unit goes back on sale and the buyer is free to buy again.
-- MySQL has the last word, so any ticket still holding its unit follows it: `confirmed`, and
-- also `processing` or `pending`. A cancel can commit between a worker's MySQL commit and its
-- `confirm.lua` (the ticket is still `processing`), and a Redis that came back old can hold a
-- ticket as `pending` whose order MySQL settled long ago. The worker's later `confirm.lua`
-- only takes `processing`, so it leaves a cancelled ticket alone.
-- A ticket already `cancelled`, `paid` or `failed`, or with no record, is left alone, so
-- running this again (a retry, another worker, a crash before `restore_due` was cleared)
-- never gives a unit back twice.
-- The unit goes back only while the product is loaded: after Redis lost it, the rebuild
-- sets the stock from MySQL, which already counts it.
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 ticket record, 5 pending
-- ARGV: 1 ticket, 2 reason, 3 now (ms), 4 record ttl (s) for a ticket that had none,
--       5 the order's id (a ticket cancelled before its confirm has none on its record yet),
--       6 the order's quantity ('' or absent: the record's)
-- An order of several units gives them all back: MySQL's quantity (ARGV[6]) when given, else
-- the record's `qty` (1 when it has none). `confirmed` and `cancelled` count units.
-- Returns 1 when the units went back, 2 when cancelled without them (product not loaded),
-- 0 when there was nothing to cancel (already settled, or the record is gone).
local r = redis.call('HMGET', KEYS[4], 'status', 'qty')
local status = r[1]
local q = tonumber(ARGV[6] or '') or tonumber(r[2] or '1')
if status == 'confirmed' then
  redis.call('HINCRBY', KEYS[2], 'confirmed', -q)
elseif status == 'pending' or status == 'processing' then
  local held = tonumber(r[2] or '1')
  if redis.call('ZREM', KEYS[5], ARGV[1]) == 1 and held > 1 then
    redis.call('HINCRBY', KEYS[2], 'pending_extra', 1 - held)
  end
  redis.call('EXPIRE', KEYS[4], ARGV[4])
else
  return 0
end
local user = redis.call('HGET', KEYS[4], 'user_id')
if user and redis.call('HGET', KEYS[3], user) == ARGV[1] then redis.call('HDEL', KEYS[3], user) end
redis.call('HSET', KEYS[4], 'status', 'cancelled', 'reason', ARGV[2], 'cancelled_at', ARGV[3],
  'order_id', ARGV[5])
notify(KEYS[4])
redis.call('HINCRBY', KEYS[2], 'cancelled', q)
if redis.call('EXISTS', KEYS[1]) == 0 then return 2 end
redis.call('INCRBY', KEYS[1], q)
return 1
