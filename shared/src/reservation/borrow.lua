-- A buyer's home bucket has fewer units than the order asks for: take what this bucket (the
-- donor; for an order of more than one unit, the home bucket is asked first) can give, up to
-- ARGV[2] units, for the ticket.
-- The loan is recorded per ticket ('taken', or 'taken:<n>' for more than one unit), so a
-- retried call takes nothing twice, and a loan the sweeper voided (void.lua) can no longer be
-- taken.
-- KEYS: 1 stock, 2 meta, 3 loans (hash ticket -> 'taken[:n]' | 'void' | 'returned')
-- ARGV: 1 ticket, 2 units wanted (absent: 1)
-- Returns {1, n} when n units are the ticket's (taken now, or by an earlier try), {0} when
-- this bucket has none for it, {2} when the bucket is not loaded (Redis lost it, or reconcile
-- is rebuilding it): its units are unknown.
local loan = redis.call('HGET', KEYS[3], ARGV[1])
if loan then
  if loan == 'taken' then return {1, 1} end
  local n = string.match(loan, '^taken:(%d+)$')
  if n then return {1, tonumber(n)} end
  return {0}
end
local stock = redis.call('GET', KEYS[1])
-- A donor whose state another run of this server wrote may be old (see epoch.lua): it lends
-- nothing, and its stock is dropped so the product is rebuilt.
local run = redis.call('HGET', KEYS[2], 'run_id')
if stock and run and run ~= string.match(redis.call('INFO', 'server'), 'run_id:(%x+)') then
  redis.call('DEL', KEYS[1])
  stock = nil
end
if not stock then return {2} end
stock = tonumber(stock)
if stock <= 0 then return {0} end
local n = math.min(stock, tonumber(ARGV[2] or '1'))
redis.call('DECRBY', KEYS[1], n)
if n == 1 then
  redis.call('HSET', KEYS[3], ARGV[1], 'taken')
else
  redis.call('HSET', KEYS[3], ARGV[1], 'taken:' .. n)
end
redis.call('HINCRBY', KEYS[2], 'lent', n)
return {1, n}
