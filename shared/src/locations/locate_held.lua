-- A buy again published a held ticket's order again (its gateway died before Kafka took it,
-- or before it recorded where): record where it landed on the ticket's record itself, but
-- only while the ticket is still `pending`. compensate.lua 'pending_only' (the sweeper's
-- expire, decided from a read that found no location) never fails a ticket located so, so
-- the sweeper cannot fail it between its read and its script once the buy again answered.
-- KEYS: 1 ticket record
-- ARGV: 1 partition, 2 offset
-- Returns 1 when recorded, 0 when the ticket is no longer pending (the sweeper expired it
-- first: the buy again answers what it is now).
if redis.call('HGET', KEYS[1], 'status') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'kp', ARGV[1], 'ko', ARGV[2])
return 1
