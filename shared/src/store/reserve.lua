-- Reserve one unit of a product for a user, atomically.
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 pending, 5 ticket record
-- ARGV: 1 user id, 2 ticket, 3 now (ms), 4 ticket ttl (s), 5 product id
-- Returns {code} or {code, held ticket}:
--   1 reserved, 2 user already holds a live ticket, 3 sold out,
--   4 unknown product, 5 sale not started, 6 sale ended
local stock = redis.call('GET', KEYS[1])
if not stock then return {4} end
local held = redis.call('HGET', KEYS[3], ARGV[1])
if held then return {2, held} end
local now = tonumber(ARGV[3])
local window = redis.call('HMGET', KEYS[2], 'starts_at', 'ends_at')
if window[1] and now < tonumber(window[1]) then return {5} end
if window[2] and now >= tonumber(window[2]) then return {6} end
if tonumber(stock) <= 0 then return {3} end
redis.call('DECR', KEYS[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[4], now, ARGV[2])
redis.call('HSET', KEYS[5], 'status', 'pending', 'user_id', ARGV[1], 'product_id', ARGV[5], 'created_at', ARGV[3])
redis.call('EXPIRE', KEYS[5], ARGV[4])
return {1}
