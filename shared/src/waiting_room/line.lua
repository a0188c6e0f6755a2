-- The whole line of a product's waiting room, in order, with the admissions so far: read
-- together, so that each place can be worked out later as queue.lua's 'waiting' answers let
-- it be (a place moves up by exactly what `wr_admitted` grows by, while `wr_returned` does
-- not grow). Read only. A gateway reads it instead of polling many entries one by one (at
-- the start, and every 30 s).
--
-- KEYS: 1 meta, 2 queue (zset user -> score)
-- Returns {admitted so far, taken back so far, user ids in order (the first is next)...}
local m = redis.call('HMGET', KEYS[1], 'wr_admitted', 'wr_returned')
local out = {m[1] or '0', m[2] or '0'}
local users = redis.call('ZRANGE', KEYS[2], 0, -1)
for i = 1, #users do out[i + 2] = users[i] end
return out
