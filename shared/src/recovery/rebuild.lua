-- Reconcile: rebuild a product's Redis state from MySQL after Redis lost it (or drifted).
-- Ticket records of settled orders are recreated first (by the caller, in batches); this
-- script then sets the counters and the stock in one step.
-- Stock = MySQL stock less the units still in flight in Redis (tickets pending or
-- processing, each with its `qty`: the records are read in the bucket's slot).
-- KEYS: 1 stock, 2 meta, 3 pending
-- ARGV: 1 MySQL stock, 2 initial stock, 3 sold rows (confirmed or paid), 4 failed rows,
--       5 starts_at ms or '', 6 ends_at ms or '', 7 now (ms): `loaded_at`, so that claim.lua
--       adopts the orders reserved before this rebuild whose records Redis lost,
--       8 paid units, 9 cancelled units, 10 how many stock buckets the product has,
--       11 max_per_buyer
-- Every counter counts units: 3 is the units of the orders confirmed or paid, 4 of the
-- failed tickets.
-- A product split into buckets is rebuilt one bucket at a time, each with its share: then
-- ARGV[1] is the bucket's stock itself, ARGV[2] is '' (the bucket's initial is what it holds:
-- stock, in flight and sold), ARGV[3], 4, 8 and 9 are the bucket's, and the loans start over.
-- Returns the new stock.
local in_flight = units_in_flight(KEYS[3], KEYS[2])
local stock = tonumber(ARGV[1]) - in_flight
local initial = ARGV[2]
redis.call('HSET', KEYS[2], 'buckets', ARGV[10], 'max_per_buyer', ARGV[11])
if ARGV[10] ~= '1' then
  stock = tonumber(ARGV[1])
  initial = stock + in_flight + tonumber(ARGV[3])
  redis.call('HSET', KEYS[2], 'lent', 0, 'borrowed', 0)
end
redis.call('SET', KEYS[1], stock)
-- The server run this state belongs to: epoch.lua tells a Redis that came back old by it.
redis.call('HSET', KEYS[2], 'run_id', string.match(redis.call('INFO', 'server'), 'run_id:(%x+)'))
redis.call('HSET', KEYS[2], 'initial', initial, 'confirmed', ARGV[3], 'failed', ARGV[4], 'loaded_at', ARGV[7],
  'paid', ARGV[8], 'cancelled', ARGV[9])
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], 'starts_at', ARGV[5]) else redis.call('HDEL', KEYS[2], 'starts_at') end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[2], 'ends_at', ARGV[6]) else redis.call('HDEL', KEYS[2], 'ends_at') end
return stock
