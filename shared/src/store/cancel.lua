-- An order was cancelled in MySQL (not paid in time, or by its buyer), whose commit also put
-- the unit back in MySQL's stock. Make Redis follow, once: confirmed -> cancelled, the unit
-- back on sale, the buyer free to buy again. Only a `confirmed` ticket changes, so running
-- this again (a retry, another worker, a crash before `restore_due` was cleared) never gives
-- a unit back twice.
-- The unit goes back only while the product is loaded: after Redis lost it, the rebuild
-- sets the stock from MySQL, which already counts it.
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 ticket record
-- ARGV: 1 ticket, 2 reason, 3 now (ms)
-- Returns 1 when the unit went back, 2 when cancelled without a unit (product not loaded),
-- 0 when the ticket was not confirmed (already cancelled, or the record is gone).
local status = redis.call('HGET', KEYS[4], 'status')
if status ~= 'confirmed' then return 0 end
local user = redis.call('HGET', KEYS[4], 'user_id')
if user and redis.call('HGET', KEYS[3], user) == ARGV[1] then redis.call('HDEL', KEYS[3], user) end
redis.call('HSET', KEYS[4], 'status', 'cancelled', 'reason', ARGV[2], 'cancelled_at', ARGV[3])
redis.call('HINCRBY', KEYS[2], 'confirmed', -1)
redis.call('HINCRBY', KEYS[2], 'cancelled', 1)
if redis.call('EXISTS', KEYS[1]) == 0 then return 2 end
redis.call('INCR', KEYS[1])
return 1
