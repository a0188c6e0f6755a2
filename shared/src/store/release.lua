-- Give back a reservation whose order never reached Kafka: stock, buyer and ticket.
-- Only a ticket that is still `pending` is released, so a worker that already claimed it wins.
-- KEYS: 1 stock, 2 buyers, 3 pending, 4 ticket record
-- ARGV: 1 user id, 2 ticket
-- Returns 1 when released, 0 when the ticket had already moved on.
if redis.call('HGET', KEYS[4], 'status') ~= 'pending' then return 0 end
if redis.call('HGET', KEYS[2], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[2], ARGV[1]) end
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('DEL', KEYS[4])
redis.call('INCR', KEYS[1])
return 1
