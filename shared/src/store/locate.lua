-- Record where the gateway's orders landed in Kafka (partition and offset, from the delivery
-- reports), so that the sweeper fails a pending ticket only once the consumer group has read
-- past it. Only existing records are touched: an expired or lost one is not recreated.
-- One call takes a product's tickets in a batch.
-- KEYS: ticket records
-- ARGV: pairs (partition, offset) in the order of KEYS
-- Returns how many were recorded.
local n = 0
for i = 1, #KEYS do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    redis.call('HSET', KEYS[i], 'kp', ARGV[i * 2 - 1], 'ko', ARGV[i * 2])
    n = n + 1
  end
end
return n
