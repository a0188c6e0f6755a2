-- An order was paid in MySQL: confirmed -> paid in Redis (the unit stays sold).
-- KEYS: 1 meta, 2 ticket record
-- ARGV: 1 now (ms)
-- Returns 1 when the record changed.
if redis.call('HGET', KEYS[2], 'status') ~= 'confirmed' then return 0 end
redis.call('HSET', KEYS[2], 'status', 'paid', 'paid_at', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'paid', 1)
return 1
