-- The sweeper's expire found MySQL failing the ticket already, for another reason (a gateway's
-- kafka_unavailable, written after Redis came back from an older snapshot with the ticket
-- pending again). A failed record takes MySQL's reason. Any other record is left alone: one
-- a worker's claim adopted since is the worker's to settle, and MySQL's row fails it there.
-- KEYS: 1 ticket record
-- ARGV: 1 reason
-- Returns 1 when the reason changed, 0 otherwise.
if redis.call('HGET', KEYS[1], 'status') ~= 'failed' then return 0 end
if redis.call('HGET', KEYS[1], 'reason') == ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'reason', ARGV[1])
return 1
