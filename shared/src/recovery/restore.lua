-- Reconcile, step one: make Redis agree with MySQL about settled tickets of one product.
-- For each ticket MySQL settled (an order row, or a failed_tickets row), write the settled
-- record where Redis has none, has it in flight, or has an older state (a `confirmed` that
-- MySQL has since paid or cancelled: the rebuild's stock already counts a cancelled unit, so
-- the record must say `cancelled` or cancel.lua would give the unit back a second time).
-- Fix the buyer and leave `pending`. Counters and stock are set afterwards by rebuild.lua.
-- KEYS: 1 buyers, 2 pending, 3.. ticket records
-- ARGV: 1 'confirmed', 'paid', 'cancelled' or 'failed', 2 ttl (s), then quadruples (ticket,
--       user id, order id or failure reason, cancel reason or '') in the order of KEYS[3..]
-- Returns how many records changed.
local settled = ARGV[1]
local changed = 0
for i = 3, #KEYS do
  local j = 2 + (i - 3) * 4
  local ticket, user, detail, why = ARGV[j + 1], ARGV[j + 2], ARGV[j + 3], ARGV[j + 4]
  local status = redis.call('HGET', KEYS[i], 'status')
  local write
  if settled == 'confirmed' or settled == 'failed' then
    write = status ~= 'confirmed' and status ~= 'failed' and status ~= 'paid' and status ~= 'cancelled'
  else
    write = status ~= settled
  end
  if write then
    if settled == 'failed' then
      redis.call('HSET', KEYS[i], 'status', settled, 'user_id', user, 'reason', detail)
    else
      redis.call('HSET', KEYS[i], 'status', settled, 'user_id', user, 'order_id', detail)
      if why ~= '' then redis.call('HSET', KEYS[i], 'reason', why) end
    end
    redis.call('EXPIRE', KEYS[i], ARGV[2])
    redis.call('ZREM', KEYS[2], ticket)
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
