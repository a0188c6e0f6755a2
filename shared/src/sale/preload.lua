-- Load a product for sale from its MySQL row.
-- Redis stock becomes the MySQL stock less the units still in flight (pending tickets, each
-- with its `qty`), so preloading again during a sale never hands out a unit twice.
-- KEYS: 1 stock, 2 meta, 3 pending
-- For a product split into stock buckets, this runs once per bucket, with the bucket's share
-- of the MySQL stock (only before the sale is loaded; afterwards reconcile rebuilds them).
-- ARGV: 1 MySQL stock, 2 starts_at ms or '', 3 ends_at ms or '', 4 now (ms),
--       5 how many buckets the product has, 6 max_per_buyer
-- `loaded_at` records the first load; claim.lua adopts only orders reserved before a later
-- rebuild.
-- Returns the new Redis stock.
local in_flight = units_in_flight(KEYS[3], KEYS[2])
local stock = tonumber(ARGV[1]) - in_flight
if stock < 0 then stock = 0 end
redis.call('SET', KEYS[1], stock)
local confirmed = tonumber(redis.call('HGET', KEYS[2], 'confirmed') or '0')
redis.call('HSET', KEYS[2], 'initial', stock + in_flight + confirmed)
redis.call('HSETNX', KEYS[2], 'loaded_at', ARGV[4])
-- The server run this state belongs to: epoch.lua tells a Redis that came back old by it.
redis.call('HSET', KEYS[2], 'run_id', string.match(redis.call('INFO', 'server'), 'run_id:(%x+)'))
-- Written for every product, 1 too, so a process reading it learns the count once.
redis.call('HSET', KEYS[2], 'buckets', ARGV[5], 'max_per_buyer', ARGV[6])
if ARGV[2] ~= '' then redis.call('HSET', KEYS[2], 'starts_at', ARGV[2]) else redis.call('HDEL', KEYS[2], 'starts_at') end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], 'ends_at', ARGV[3]) else redis.call('HDEL', KEYS[2], 'ends_at') end
return stock
