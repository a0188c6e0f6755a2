-- The sweeper gives up a ticket left `voiding` (its gateway never finished the borrow): in
-- this donor bucket, a loan taken for it goes back (the unit back on sale), and one not taken
-- is voided, so the gateway's late borrow call can no longer take it.
-- The unit goes back only while the bucket is loaded: after Redis lost it, the rebuild sets
-- the stock from MySQL, which never counted the loan.
-- KEYS: 1 stock, 2 meta, 3 loans
-- ARGV: 1 ticket
-- Returns 1 when a unit went back, 0 otherwise.
local loan = redis.call('HGET', KEYS[3], ARGV[1])
if loan == 'taken' then
  redis.call('HSET', KEYS[3], ARGV[1], 'returned')
  if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
  redis.call('HINCRBY', KEYS[2], 'lent', -1)
  redis.call('INCR', KEYS[1])
  return 1
elseif not loan then
  redis.call('HSET', KEYS[3], ARGV[1], 'void')
end
return 0
