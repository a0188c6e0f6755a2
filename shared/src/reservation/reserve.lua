-- Reserve an order of one or more units (all of them or none) of a product for each of several
-- buyers of one stock bucket, atomically and in order (the gateway sends the buys that arrive together in one call: `batch.rs`).
-- The product's stock, meta and the Redis time are read once per call, the buyers hash and
-- the buyers' rate-limit buckets once per call too (HMGET, MGET), and the stock, buyers and
-- pending set written once at its end; each buyer then costs its ticket record (HSET) and,
-- when given, its rate-limit bucket (SET ... PX). A buyer whose step raises an error gets
-- {0, error} and leaves nothing behind in the stock, buyers or pending set (its token, once
-- taken, stays taken); the others still count.
-- A pending record has no expiry: what settles it sets one (confirm.lua, compensate.lua,
-- release.lua), so a record lives SECKILL_TICKET_TTL_SECS from its settling, however long its
-- order waited. The pending records are written last, after the stock, buyers and pending
-- set, so a call that fails part-way leaves none behind. A `borrowing` record expires after
-- that TTL (the sweeper settles it sooner; settle_borrow.lua takes the expiry off once it
-- becomes pending).
-- The same call first records where earlier orders of this bucket landed in Kafka (their
-- delivery reports came in while this call's buyers waited): one entry of the bucket's
-- `located` list for all of them (see locate.lua).
-- For a product split into stock buckets, the keys are those of the buyers' home bucket, and
-- an empty bucket holds a buyer's place (`borrowing`) while the caller borrows a unit from
-- another bucket (borrow.lua, then settle_borrow.lua).
-- When Redis is one server, a buyer's per-user limit is taken here first (bucket_take and
-- its helpers, from token_bucket.lua, are prepended); its bucket is written only when a
-- token was taken.
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 pending, and for a product with a waiting room:
--       5 admitted (zset user -> admission expiry), 6 done (hash), 7 queue (zset);
--       8 borrowing (zset ticket -> reserved at, tickets waiting for a loan), 9 located (list,
--       see locate.lua); then per buyer its ticket record, and its rate-limit bucket when its
--       flags include 2
-- ARGV: 1 ticket ttl (s, for a `borrowing` record), 2 the located entry of earlier orders
--       ('' for none), 3 the limit's rate and 4 its burst ('' when no buyer of the call takes
--       a token: every buyer of a call has its gateway's limit), then 6 per buyer: user id,
--       ticket, now (ms), flags (the sum of 1: the gateway verified the buyer's admission
--       token, and 2: the buyer takes a token, its bucket's key following its record's), how
--       many buckets the caller assumed, and the units asked for (q)
-- An order of q > 1 units has `qty` on its record, and adds q - 1 to the meta's
-- `pending_extra`: the units in flight are the pending set's size plus that (every script that
-- takes a ticket out of the pending set takes its q - 1 off too).
-- Returns one reply per buyer, in order, {code} or {code, value}:
--   1 reserved, {2, ticket} the user already holds this live ticket, 3 sold out,
--   4 unknown product, 5 sale not started, 6 sale ended,
--   7 admission required (a waiting-room product, no verified token),
--   8 not admitted now (the admission lapsed, or was taken back to keep the cap),
--   9 this bucket is empty: the buyer's place is held (`borrowing`), borrow a unit elsewhere,
--   {10, buckets} the product has that many buckets, not the number assumed: ask again,
--   {11, ms} the buyer's rate limit: no token, the next comes in that many ms,
--   {12, max} more units asked for than the product's `max_per_buyer` (max),
--   {13, left} fewer units left than asked for, but some (a product in one bucket; in
--   buckets, the order borrows instead: 9),
--   {0, error} this buyer's step failed
-- A waiting-room product is only bought by an admitted buyer, checked here before the stock
-- is touched. Buying ends the admission; and since admitted-not-bought must stay within
-- ceil(factor × units left / max_per_buyer) (each admission may take max_per_buyer units), the
-- latest admissions go back to the head of the queue when the units left shrink below that.
local left = tonumber(redis.call('GET', KEYS[1]))
local meta = redis.call('HMGET', KEYS[2], 'starts_at', 'ends_at', 'wr_rate', 'wr_factor', 'buckets', 'run_id', 'max_per_buyer', 'initial')
-- A state another run of this server wrote may be old (a restart from a snapshot, a failover
-- to a lagging replica: see epoch.lua). No unit is sold from it: its stock is dropped, so the
-- product counts as lost (4: the gateway answers `503` and rebuilds it from MySQL).
if left and meta[6] and meta[6] ~= string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') then
  redis.log(redis.LOG_WARNING, 'seckill: ' .. KEYS[2] .. ' was written by another run; dropping ' .. KEYS[1] .. ' so that it is rebuilt')
  redis.call('DEL', KEYS[1])
  left = nil
end
-- A stock without its meta (every preload and rebuild writes `initial`): the sale's terms (its
-- window, its waiting room, max_per_buyer) and counters are gone, so nothing is sold by guess;
-- the product counts as lost and is rebuilt, as above.
if left and not meta[8] then
  redis.log(redis.LOG_WARNING, 'seckill: ' .. KEYS[2] .. ' is gone; dropping ' .. KEYS[1] .. ' so that it is rebuilt')
  redis.call('DEL', KEYS[1])
  left = nil
end
local buckets = meta[5] or '1'
local most = tonumber(meta[7] or '1')
local clock, clock_s
-- Units taken by this call, and the units beyond one per order (`pending_extra`).
local taken, extra = 0, 0
-- Written at the end: user -> ticket (also what this call already gave each user), the
-- pending set's score/member pairs, and the new pending records (key, user, reserved at, units:
-- four entries each).
local held, pending, records = {}, {}, {}

-- Read once for all buyers: their tickets (HMGET) and rate-limit buckets (MGET); a bucket
-- taken earlier in this call is read from `bucket_now`.
local found, bucket_now = {}, {}

-- The limit's numbers, parsed once per call, when its first buyer takes a token: rate, burst,
-- the buckets' expiry (PX) and the value a new buyer's bucket gets (`fresh`); the Redis
-- time, as a number and a string, is read once too (`clock`, `clock_s`).
local limit

local function take(limiter)
  if not limit then
    local r, b = bucket_limit(ARGV[3], ARGV[4])
    limit = {rate = r, burst = b, px = string.format('%d', bucket_life(r, b))}
  end
  if not clock then
    clock = redis_ms()
    clock_s = string.format('%d', clock)
  end
  local seen = bucket_now[limiter]
  if seen == nil then seen = found.buckets[limiter] end
  -- No bucket (most buyers of a sale: their first buy) is a full one: what taking its token
  -- leaves is the same for every such buyer of this call, so it is worked out once.
  local wait, value = 0, nil
  if seen then
    local tokens
    wait, tokens = bucket_take(seen, limit.rate, limit.burst, clock)
    if wait == 0 then value = bucket_value(tokens, clock_s) end
  else
    if not limit.fresh then
      local _, tokens = bucket_take(false, limit.rate, limit.burst, clock)
      limit.fresh = bucket_value(tokens, clock_s)
    end
    value = limit.fresh
  end
  -- A buy refused writes nothing: the bucket as it was still counts the same tokens.
  if wait == 0 then
    redis.call('SET', limiter, value, 'PX', limit.px)
    bucket_now[limiter] = value
  end
  return wait
end

-- A reservation's reply: one table for every buyer reserved (the reply is only read).
local RESERVED = {1}

local function reserve(record, limiter, user, ticket, now_s, admitted, assumed, q_s, i)
  if limiter then
    local wait = take(limiter)
    if wait > 0 then return {11, wait} end
  end
  if not left then return {4} end
  if buckets ~= assumed then return {10, buckets} end
  local h = held[user] or found.tickets[i]
  if h then return {2, h} end
  local q = tonumber(q_s) or 1
  if q > most then return {12, most} end
  local now = tonumber(now_s)
  if meta[1] and now < tonumber(meta[1]) then return {5} end
  if meta[2] and now >= tonumber(meta[2]) then return {6} end
  if meta[3] then
    if not admitted then return {7} end
    local until_ms = redis.call('ZSCORE', KEYS[5], user)
    if (not until_ms) or tonumber(until_ms) <= now then return {8} end
  end
  if left < q then
    if buckets == '1' then
      if left <= 0 then return {3} end
      return {13, left}
    end
    redis.call('HSET', record, 'status', 'borrowing', 'user_id', user, 'created_at', now_s)
    if q > 1 then redis.call('HSET', record, 'qty', q_s) end
    redis.call('EXPIRE', record, ARGV[1])
    redis.call('ZADD', KEYS[8], now_s, ticket)
    held[user] = ticket
    return {9}
  end
  -- Computed before any write, so that a damaged factor fails this buyer with nothing written.
  local cap = meta[3] and math.ceil(tonumber(meta[4]) * math.max(left - q, 0) / most)
  if meta[3] then
    redis.call('ZREM', KEYS[5], user)
    redis.call('HSET', KEYS[6], user, 'bought')
    while redis.call('ZCARD', KEYS[5]) > cap do
      local latest = redis.call('ZRANGE', KEYS[5], -1, -1)[1]
      redis.call('ZREM', KEYS[5], latest)
      local head = redis.call('ZRANGE', KEYS[7], 0, 0, 'WITHSCORES')
      local score = -1
      if head[2] then score = tonumber(head[2]) - 1 end
      redis.call('ZADD', KEYS[7], score, latest)
      -- Places behind it move back by one: live streams read their places again.
      redis.call('HINCRBY', KEYS[2], 'wr_returned', 1)
    end
  end
  left = left - q
  taken = taken + q
  extra = extra + q - 1
  pending[#pending + 1] = now_s
  pending[#pending + 1] = ticket
  local r = #records
  records[r + 1], records[r + 2], records[r + 3], records[r + 4] = record, user, now_s, q
  held[user] = ticket
  return RESERVED
end

-- Earlier orders' Kafka locations.
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[9], ARGV[2]) end

-- The buyers: where their keys are (the n-th buyer's record at KEYS[recs[n]], its bucket at
-- KEYS[recs[n] + 1] when it takes a token) and their flags, then one read of their tickets
-- and buckets.
local recs, flags, users, limiters = {}, {}, {}, {}
local k = 10
for i = 5, #ARGV, 6 do
  local n = #recs + 1
  local f = tonumber(ARGV[i + 3]) or 0
  recs[n], flags[n], users[n] = k, f, ARGV[i]
  if f >= 2 then
    limiters[#limiters + 1] = KEYS[k + 1]
    k = k + 2
  else
    k = k + 1
  end
end
found.tickets, found.buckets = {}, {}
if #users > 0 then found.tickets = redis.call('HMGET', KEYS[3], unpack(users)) end
if #limiters > 0 then
  local values = redis.call('MGET', unpack(limiters))
  for j = 1, #limiters do found.buckets[limiters[j]] = values[j] end
end

local out = {}
for n = 1, #recs do
  local i, f = 6 * n - 1, flags[n]
  local limiter = f >= 2 and KEYS[recs[n] + 1] or nil
  local ok, reply = pcall(reserve, KEYS[recs[n]], limiter, ARGV[i], ARGV[i + 1], ARGV[i + 2],
    f % 2 == 1, ARGV[i + 4], ARGV[i + 5], n)
  if not ok then
    if type(reply) == 'table' then reply = reply.err end
    reply = {0, tostring(reply)}
  end
  out[#out + 1] = reply
end
-- The stock first, as the one-buyer script did: if it cannot be taken, nothing else is written.
if taken > 0 then redis.call('DECRBY', KEYS[1], taken) end
if extra > 0 then redis.call('HINCRBY', KEYS[2], 'pending_extra', extra) end
local buyers = {}
for user, ticket in pairs(held) do
  buyers[#buyers + 1] = user
  buyers[#buyers + 1] = ticket
end
if #buyers > 0 then redis.call('HSET', KEYS[3], unpack(buyers)) end
if #pending > 0 then redis.call('ZADD', KEYS[4], unpack(pending)) end
for r = 1, #records, 4 do
  if records[r + 3] > 1 then
    redis.call('HSET', records[r], 'status', 'pending', 'user_id', records[r + 1], 'created_at',
      records[r + 2], 'qty', records[r + 3])
  else
    redis.call('HSET', records[r], 'status', 'pending', 'user_id', records[r + 1], 'created_at',
      records[r + 2])
  end
end
return out
