-- Record where the gateway's order landed in Kafka (partition and offset, from the delivery
-- report), so that the sweeper fails a pending ticket only once the consumer group has read
-- past it. Only an existing record is touched: an expired or lost one is not recreated.
-- KEYS: 1 ticket record
-- ARGV: 1 partition, 2 offset
-- Returns 1 when recorded.
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'kp', ARGV[1], 'ko', ARGV[2])
return 1
