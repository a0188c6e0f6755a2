-- Reconcile, step one: make Redis agree with MySQL about settled tickets of one product.
-- For each ticket MySQL settled (an order row, or a failed_tickets row), write the settled
-- record where Redis has none, has it in flight, or has an older state (a `confirmed` that
-- MySQL has since paid or cancelled: the rebuild's stock already counts a cancelled unit, so
-- the record must say `cancelled` or cancel.lua would give the unit back a second time).
-- Fix the buyer and leave `pending`. Counters and stock are set afterwards by rebuild.lua.
-- A ticket that leaves `pending` here takes its units beyond one off the meta's
-- `pending_extra`; rebuild.lua then counts them afresh anyway.
-- KEYS: 1 buyers, 2 pending, 3 meta, 4.. ticket records
-- ARGV: 1 'confirmed', 'paid', 'cancelled' or 'failed', 2 ttl (s), then quintuples (ticket,
--       user id, order id or failure reason, cancel reason or '', units) in the order of
--       KEYS[4..]
-- Returns how many records changed.
local settled = ARGV[1]
local changed = 0
for i = 4, #KEYS do
  local j = 2 + (i - 4) * 5
  local ticket, user, detail, why, q = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4], ARGV[j + 5]
  local status = redis.call('HGET', KEYS[i], 'status')
  local write
  if settled == 'confirmed' or settled == 'failed' then
    write = status ~= 'confirmed' and status ~= 'failed' and status ~= 'paid' and status ~= 'cancelled'
  else
    write = status ~= settled
  end
  if write then
    if redis.call('ZREM', KEYS[2], ticket) == 1 then
      local held = tonumber(redis.call('HGET', KEYS[i], 'qty') or '1')
      if held > 1 then redis.call('HINCRBY', KEYS[3], 'pending_extra', 1 - held) end
    end
    if q ~= '1' then redis.call('HSET', KEYS[i], 'qty', q) else redis.call('HDEL', KEYS[i], 'qty') end
    if settled == 'failed' then
      redis.call('HSET', KEYS[i], 'status', settled, 'user_id', user, 'reason', detail)
    else
      redis.call('HSET', KEYS[i], 'status', settled, 'user_id', user, 'order_id', detail)
      if why ~= '' then redis.call('HSET', KEYS[i], 'reason', why) end
    end
    redis.call('EXPIRE', KEYS[i], ARGV[2])
    notify(KEYS[i])
    changed = changed + 1
  end
  if settled == 'confirmed' or settled == 'paid' then
    redis.call('HSET', KEYS[1], user, ticket)
  elseif redis.call('HGET', KEYS[1], user) == ticket then
    redis.call('HDEL', KEYS[1], user)
  end
end
return changed
