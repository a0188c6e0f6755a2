-- Give back a reservation whose order never reached Kafka: the unit and the user go back, and
-- the ticket is marked failed (not deleted), so a message that reached Kafka after all is
-- skipped by the worker instead of selling the unit twice.
-- Only a ticket that is still `pending` is released, so a worker that already claimed it wins.
-- The failed record expires ARGV[4] seconds later (a pending record has no expiry of its own).
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 pending, 5 ticket record
-- ARGV: 1 user id, 2 ticket, 3 reason, 4 record ttl (s)
-- Returns 1 when released, 0 when the ticket had already moved on.
if redis.call('HGET', KEYS[5], 'status') ~= 'pending' then return 0 end
if redis.call('HGET', KEYS[3], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[3], ARGV[1]) end
redis.call('ZREM', KEYS[4], ARGV[2])
redis.call('HSET', KEYS[5], 'status', 'failed', 'reason', ARGV[3])
redis.call('EXPIRE', KEYS[5], ARGV[4])
redis.call('HINCRBY', KEYS[2], 'failed', 1)
redis.call('INCR', KEYS[1])
return 1
