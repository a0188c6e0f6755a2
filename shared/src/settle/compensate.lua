-- An order failed for good: free the user and, exactly once, settle the ticket as failed.
-- Only a ticket that is still pending or processing is compensated, so a redelivered message
-- can never restore the stock twice.
-- Modes (ARGV[3]):
-- * 'any': give the unit back.
-- * 'pending_only' (the sweeper): as 'any', but a ticket a worker has claimed is left alone,
--   and so is one reserved after ARGV[4] (ms), and one located on its record.
-- * 'heal': MySQL had no unit for this reservation, so Redis over-counted: the unit is not
--   given back (it never existed).
-- * 'heal' on a stock below zero gives the unit back all the same: a rebuild sets the stock to
--   MySQL's less the orders in flight, which is below zero when more are in flight than MySQL
--   has units (orders adopted after the loss); each that fails `out_of_stock` frees a place.
-- The unit goes back only while the product is loaded: after Redis lost its data, the
-- rebuild sets the stock from MySQL, and a unit added before it would be sold twice.
-- 'pending_only' decides from Redis alone, so it acts only on this server run's state, as
-- reserve.lua does: a state another run wrote may be old (a restart from a snapshot, a
-- failover to a lagging replica: see epoch.lua), and its `pending` may be an order MySQL has
-- since confirmed. Then the stock key is dropped (the product is rebuilt), nothing changes,
-- and 0 is returned.
-- The failed record expires ARGV[5] seconds later (a pending record has no expiry of its own).
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 pending, 5 ticket record
-- ARGV: 1 ticket, 2 reason, 3 mode, 4 reserved-before cutoff (ms), 5 record ttl (s)
-- An order of several units (`qty`) gives all of them back (and takes them off the meta's
-- `pending_extra` and onto `failed`, which counts units); 'heal' on a stock below zero gives
-- back as many as bring it to zero, at most the order's.
-- Returns 1 when compensated and its units went back, 2 when compensated without giving a
-- unit back, 0 when the ticket had already settled, is claimed or is gone.
local status = redis.call('HGET', KEYS[5], 'status')
if ARGV[3] == 'pending_only' then
  if status ~= 'pending' then return 0 end
  -- Located on the record (locate_held.lua: a buy again published it and answered 200, after
  -- the sweeper read it without a location): its order is in Kafka, a worker settles it.
  if redis.call('HEXISTS', KEYS[5], 'kp') == 1 then return 0 end
  local run = redis.call('HGET', KEYS[2], 'run_id')
  if run and run ~= string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') then
    redis.log(redis.LOG_WARNING, 'seckill: ' .. KEYS[2] .. ' was written by another run; dropping ' .. KEYS[1] .. ' so that it is rebuilt')
    redis.call('DEL', KEYS[1])
    return 0
  end
  local created = tonumber(redis.call('HGET', KEYS[5], 'created_at') or '0')
  if created > tonumber(ARGV[4]) then return 0 end
elseif status ~= 'pending' and status ~= 'processing' then
  return 0
end
local user = redis.call('HGET', KEYS[5], 'user_id')
if user and redis.call('HGET', KEYS[3], user) == ARGV[1] then redis.call('HDEL', KEYS[3], user) end
local q = tonumber(redis.call('HGET', KEYS[5], 'qty') or '1')
if redis.call('ZREM', KEYS[4], ARGV[1]) == 1 and q > 1 then
  redis.call('HINCRBY', KEYS[2], 'pending_extra', 1 - q)
end
redis.call('HSET', KEYS[5], 'status', 'failed', 'reason', ARGV[2])
notify(KEYS[5])
redis.call('EXPIRE', KEYS[5], ARGV[5])
redis.call('HINCRBY', KEYS[2], 'failed', q)
local left = tonumber(redis.call('GET', KEYS[1]))
if not left or (ARGV[3] == 'heal' and left >= 0) then return 2 end
if ARGV[3] == 'heal' then q = math.min(q, -left) end
redis.call('INCRBY', KEYS[1], q)
return 1
