-- A worker claims tickets of one product before it writes them to MySQL:
-- pending -> processing. A ticket already processing (a redelivery after a crash) stays claimed.
--
-- A ticket with no record at all is an orphan: its message outlived the Redis copy (Redis lost
-- its data and was reconciled from MySQL). It is adopted as if it had just been reserved:
-- record, buyer and pending entry are recreated and one unit is taken, even below zero, so
-- that `initial = stock + pending + confirmed` still holds. MySQL has the last word on stock.
--
-- KEYS: 1 stock, 2 buyers, 3 pending, 4.. ticket records
-- ARGV: triples (ticket, user id, reserved at ms) in the order of KEYS[4..], then ttl (s), product id
-- Returns one status per ticket: 'processing' when claimed, else the status found.
local n = #KEYS - 3
local ttl = ARGV[n * 3 + 1]
local product = ARGV[n * 3 + 2]
local out = {}
for i = 1, n do
  local key = KEYS[i + 3]
  local ticket, user, created = ARGV[i * 3 - 2], ARGV[i * 3 - 1], ARGV[i * 3]
  local status = redis.call('HGET', key, 'status')
  if status == 'pending' then
    redis.call('HSET', key, 'status', 'processing')
    status = 'processing'
  elseif not status then
    redis.call('HSET', key, 'status', 'processing', 'user_id', user, 'product_id', product,
      'created_at', created, 'orphan', '1')
    redis.call('EXPIRE', key, ttl)
    redis.call('ZADD', KEYS[3], created, ticket)
    if not redis.call('HGET', KEYS[2], user) then redis.call('HSET', KEYS[2], user, ticket) end
    redis.call('DECR', KEYS[1])
    status = 'processing'
  end
  out[i] = status
end
return out
