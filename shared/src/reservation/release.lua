-- Give back a reservation whose order never reached Kafka: the unit and the user go back, and
-- the ticket is marked failed (not deleted), so a message that reached Kafka after all is
-- skipped by the worker instead of selling the unit twice.
-- Only a ticket that is still `pending` is released, so a worker that already claimed it wins.
-- The failed record expires ARGV[4] seconds later (a pending record has no expiry of its own).
-- A waiting-room buyer gets back the admission that reserve.lua ended (the buy did not happen),
-- until ARGV[5] + ARGV[6]: only when this ticket is the buyer's live one, and a purchase that
-- went through is never released, so buying still ends an admission once.
-- The unit goes back only while the product is loaded (as in compensate.lua and cancel.lua): a
-- stock key that Redis lost, or that a bucket reconcile froze, is rebuilt from MySQL, which
-- already counts the unit; recreating it would put the product back on sale mid-rebuild, or
-- hide the loss from the gateways and sweepers that look for it.
-- It decides from Redis alone, so it acts only on this server run's state, as reserve.lua
-- does (see compensate.lua 'pending_only'): a state another run wrote may be old, and its
-- `pending` an order a worker has since confirmed. Then the stock key is dropped (the product
-- is rebuilt) and nothing changes.
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 pending, 5 ticket record, 6 admitted, 7 done (waiting room)
-- ARGV: 1 user id, 2 ticket, 3 reason, 4 record ttl (s), 5 now (ms), 6 admission ttl (ms)
-- An order of several units (`qty`) gives all of them back; `failed` counts units.
-- Returns 1 when released with its units, 2 when released without them (product not loaded),
-- 0 when the ticket had already moved on (or a buy again located it).
if redis.call('HGET', KEYS[5], 'status') ~= 'pending' then return 0 end
-- Located on the record (locate_held.lua): a buy again published it and answered 200 while
-- this gateway's own publish was still failing. Its order is in Kafka; a worker settles it.
if redis.call('HEXISTS', KEYS[5], 'kp') == 1 then return 0 end
local run = redis.call('HGET', KEYS[2], 'run_id')
if run and run ~= string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') then
  redis.log(redis.LOG_WARNING, 'seckill: ' .. KEYS[2] .. ' was written by another run; dropping ' .. KEYS[1] .. ' so that it is rebuilt')
  redis.call('DEL', KEYS[1])
  return 0
end
if redis.call('HGET', KEYS[3], ARGV[1]) == ARGV[2] then
  redis.call('HDEL', KEYS[3], ARGV[1])
  if redis.call('HGET', KEYS[7], ARGV[1]) == 'bought' then
    redis.call('HDEL', KEYS[7], ARGV[1])
    redis.call('ZADD', KEYS[6], tonumber(ARGV[5]) + tonumber(ARGV[6]), ARGV[1])
  end
end
local q = tonumber(redis.call('HGET', KEYS[5], 'qty') or '1')
if redis.call('ZREM', KEYS[4], ARGV[2]) == 1 and q > 1 then
  redis.call('HINCRBY', KEYS[2], 'pending_extra', 1 - q)
end
redis.call('HSET', KEYS[5], 'status', 'failed', 'reason', ARGV[3])
notify(KEYS[5])
redis.call('EXPIRE', KEYS[5], ARGV[4])
redis.call('HINCRBY', KEYS[2], 'failed', q)
if redis.call('EXISTS', KEYS[1]) == 0 then return 2 end
redis.call('INCRBY', KEYS[1], q)
return 1
