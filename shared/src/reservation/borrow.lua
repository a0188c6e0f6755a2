-- A buyer's home bucket is empty: take one unit from this bucket (the donor) for the ticket.
-- The loan is recorded per ticket, so a retried call takes nothing twice, and a loan the
-- sweeper voided (void.lua) can no longer be taken.
-- KEYS: 1 stock, 2 meta, 3 loans (hash ticket -> 'taken' | 'void' | 'returned')
-- ARGV: 1 ticket
-- Returns 1 when the unit is the ticket's, 0 when this bucket has none for it, 2 when the
-- bucket is not loaded (Redis lost it, or reconcile is rebuilding it): its units are unknown.
local loan = redis.call('HGET', KEYS[3], ARGV[1])
if loan then
  if loan == 'taken' then return 1 end
  return 0
end
local stock = redis.call('GET', KEYS[1])
-- A donor whose state another run of this server wrote may be old (see epoch.lua): it lends
-- nothing, and its stock is dropped so the product is rebuilt.
local run = redis.call('HGET', KEYS[2], 'run_id')
if stock and run and run ~= string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') then
  redis.call('DEL', KEYS[1])
  stock = nil
end
if not stock then return 2 end
if tonumber(stock) <= 0 then return 0 end
redis.call('DECR', KEYS[1])
redis.call('HSET', KEYS[3], ARGV[1], 'taken')
redis.call('HINCRBY', KEYS[2], 'lent', 1)
return 1
