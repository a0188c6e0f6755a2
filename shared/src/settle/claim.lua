-- A worker claims tickets of one product before it writes them to MySQL:
-- pending -> processing. A ticket already processing (a redelivery after a crash) stays claimed.
--
-- A ticket with no record is adopted only when Redis really lost it:
-- * the product has no stock key (Redis lost its data and the product is not rebuilt yet), or
-- * the product was rebuilt (reconciled) after the order was reserved (`loaded_at` in meta).
-- Adopting recreates the record (with no expiry, as for any order in flight), the buyer and
-- the pending entry (with the message's quantity), so the rebuild counts the order as in
-- flight. Its units are taken only while the product is loaded; before the rebuild there is
-- no stock to take them from, and the rebuild sets the stock from MySQL less what is pending.
-- * Redis came back old (restarted from a snapshot or an AOF that missed the last writes, or
--   failed over to a replica that lagged): the record of an order reserved less than
--   SECKILL_TICKET_TTL_SECS ago is gone, though a record expires only that long after its
--   order settled. The product's state cannot be trusted then: its stock key is dropped, so
--   that the product counts as lost (buys get `503`) and is rebuilt from MySQL, as after a
--   loss, and the order is adopted.
-- Any other missing record has expired (SECKILL_TICKET_TTL_SECS after its order settled: a
-- record in flight has no expiry), so it is skipped as `expired` and MySQL keeps the last
-- word.
--
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 pending, 5.. ticket records
-- ARGV: quadruples (ticket, user id, reserved at ms, units) in the order of KEYS[5..], then
--       the record TTL (s)
-- Returns one status per ticket: 'processing' when claimed, else the status found ('expired'
-- for a record that is gone and was not lost).
local n = #KEYS - 4
local loaded = redis.call('EXISTS', KEYS[1]) == 1
local loaded_at = tonumber(redis.call('HGET', KEYS[2], 'loaded_at') or '0')
local time = redis.call('TIME')
local young = time[1] * 1000 + math.floor(time[2] / 1000) - tonumber(ARGV[n * 4 + 1]) * 1000
local out = {}
for i = 1, n do
  local key = KEYS[i + 4]
  local ticket, user, created, q = ARGV[i * 4 - 3], ARGV[i * 4 - 2], ARGV[i * 4 - 1], tonumber(ARGV[i * 4])
  local status = redis.call('HGET', key, 'status')
  if status == 'pending' then
    redis.call('HSET', key, 'status', 'processing')
    status = 'processing'
  elseif not status then
    if loaded and tonumber(created) >= loaded_at and tonumber(created) > young then
      redis.log(redis.LOG_WARNING, 'seckill: the record of ' .. ticket .. ', reserved at ' .. created ..
        ', is gone: Redis came back old; dropping ' .. KEYS[1] .. ' so that the product is rebuilt')
      redis.call('DEL', KEYS[1])
      loaded = false
    end
    if (not loaded) or tonumber(created) < loaded_at then
      redis.call('HSET', key, 'status', 'processing', 'user_id', user, 'created_at', created,
        'orphan', '1')
      if q > 1 then
        redis.call('HSET', key, 'qty', q)
        redis.call('HINCRBY', KEYS[2], 'pending_extra', q - 1)
      end
      redis.call('ZADD', KEYS[4], created, ticket)
      if not redis.call('HGET', KEYS[3], user) then redis.call('HSET', KEYS[3], user, ticket) end
      if loaded then redis.call('DECRBY', KEYS[1], q) end
      status = 'processing'
    else
      status = 'expired'
    end
  end
  out[i] = status
end
return out
