-- Reserve one unit of a product for a user, atomically. The gateway runs it as the body of
-- `reserve(KEYS, ARGV)`, once per buyer of a batch (reserve_batch.lua); on its own it is the
-- one-buyer script that figure (5) of scripts/bench.sh measures.
-- For a product split into stock buckets, the keys are those of the buyer's home bucket, and
-- an empty bucket holds the buyer's place (`borrowing`) while the caller borrows a unit from
-- another bucket (borrow.lua, then settle_borrow.lua).
-- When Redis is one server, the per-user limit is taken here first, in the same call
-- (take_token, from token_bucket.lua, is prepended): KEYS[10] and ARGV[8], 9 are given.
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 pending, 5 ticket record, and for a product with a
--       waiting room: 6 admitted (zset user -> admission expiry), 7 done (hash), 8 queue (zset);
--       9 borrowing (zset ticket -> reserved at, tickets waiting for a loan); 10 the buyer's
--       rate-limit bucket (optional)
-- ARGV: 1 user id, 2 ticket, 3 now (ms), 4 ticket ttl (s), 5 product id, 6 '1' when the
--       gateway verified the buyer's admission token, 7 how many buckets the caller assumed,
--       8 and 9 the limit's rate and burst (with KEYS[10])
-- Returns {code} or {code, held ticket}:
--   1 reserved, 2 user already holds a live ticket, 3 sold out,
--   4 unknown product, 5 sale not started, 6 sale ended,
--   7 admission required (a waiting-room product, no verified token),
--   8 not admitted now (the admission lapsed, or was taken back to keep the cap),
--   9 this bucket is empty: the buyer's place is held (`borrowing`), borrow a unit elsewhere,
--   {10, buckets} the product has that many buckets, not ARGV[7]: ask the right one,
--   {11, ms} the buyer's rate limit: no token, the next comes in that many ms
-- A waiting-room product is only bought by an admitted buyer, checked here before the stock
-- is touched. Buying ends the admission; and since admitted-not-bought must stay within
-- ceil(factor × units left), the latest admissions go back to the head of the queue when the
-- units left shrink below that.
if KEYS[10] then
  local wait = take_token(KEYS[10], ARGV[8], ARGV[9])
  if wait > 0 then return {11, wait} end
end
local stock = redis.call('GET', KEYS[1])
if not stock then return {4} end
local meta = redis.call('HMGET', KEYS[2], 'starts_at', 'ends_at', 'wr_rate', 'wr_factor', 'buckets')
local buckets = meta[5] or '1'
if buckets ~= ARGV[7] then return {10, buckets} end
local held = redis.call('HGET', KEYS[3], ARGV[1])
if held then return {2, held} end
local now = tonumber(ARGV[3])
if meta[1] and now < tonumber(meta[1]) then return {5} end
if meta[2] and now >= tonumber(meta[2]) then return {6} end
local wr = meta[3] and #KEYS >= 8
if meta[3] then
  if ARGV[6] ~= '1' or #KEYS < 8 then return {7} end
  local until_ms = redis.call('ZSCORE', KEYS[6], ARGV[1])
  if (not until_ms) or tonumber(until_ms) <= now then return {8} end
end
if tonumber(stock) <= 0 then
  if buckets == '1' then return {3} end
  redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
  redis.call('ZADD', KEYS[9], ARGV[3], ARGV[2])
  redis.call('HSET', KEYS[5], 'status', 'borrowing', 'user_id', ARGV[1], 'product_id', ARGV[5], 'created_at', ARGV[3])
  redis.call('EXPIRE', KEYS[5], ARGV[4])
  return {9}
end
local left = redis.call('DECR', KEYS[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
redis.call('HSET', KEYS[5], 'status', 'pending', 'user_id', ARGV[1], 'product_id', ARGV[5], 'created_at', ARGV[3])
redis.call('EXPIRE', KEYS[5], ARGV[4])
if wr then
  redis.call('ZREM', KEYS[6], ARGV[1])
  redis.call('HSET', KEYS[7], ARGV[1], 'bought')
  local cap = math.ceil(tonumber(meta[4]) * math.max(left, 0))
  while redis.call('ZCARD', KEYS[6]) > cap do
    local latest = redis.call('ZRANGE', KEYS[6], -1, -1)[1]
    redis.call('ZREM', KEYS[6], latest)
    local head = redis.call('ZRANGE', KEYS[8], 0, 0, 'WITHSCORES')
    local score = -1
    if head[2] then score = tonumber(head[2]) - 1 end
    redis.call('ZADD', KEYS[8], score, latest)
  end
end
return {1}
