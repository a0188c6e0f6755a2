-- A borrow is given up (the sweeper, for one its gateway never finished; or the gateway, when
-- the buckets together had fewer units than the order asks for): in this bucket, a loan taken
-- for it goes back (its units back on sale), and one not taken is voided, so a late borrow
-- call can no longer take it.
-- The units go back only while the bucket is loaded: after Redis lost it, the rebuild sets
-- the stock from MySQL, which never counted the loan.
-- KEYS: 1 stock, 2 meta, 3 loans
-- ARGV: 1 ticket
-- Returns how many units went back.
local loan = redis.call('HGET', KEYS[3], ARGV[1])
if not loan then
  redis.call('HSET', KEYS[3], ARGV[1], 'void')
  return 0
end
local n
if loan == 'taken' then n = 1 else n = tonumber(string.match(loan, '^taken:(%d+)$')) end
if not n then return 0 end
redis.call('HSET', KEYS[3], ARGV[1], 'returned')
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], 'lent', -n)
redis.call('INCRBY', KEYS[1], n)
return n
