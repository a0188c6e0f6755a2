-- Is a product bucket's state from this Redis server's run? A Redis that restarts from a
-- snapshot or an AOF that missed the last writes, or a replica that lagged and was failed
-- over to, comes back with older data and nothing missing, so the stock key alone does not
-- tell. Every run of a Redis server has its own `run_id`, which no snapshot and no replica
-- copies: preload.lua and rebuild.lua write the run's id into the product's meta, and a
-- different id there means the state may be old. Its stock key is then dropped, so the
-- product counts as lost (buys get `503`) and is rebuilt from MySQL, as after a loss. A state
-- that was current after all is rebuilt the same, which costs a few seconds of `503`.
-- Meta written by a build before this check has no id yet: this run's is written.
-- KEYS: 1 stock, 2 meta
-- Returns 1 when the state is this run's, 2 when the product is not loaded (or lost already),
-- 0 when it was written by another run and has just been dropped.
if redis.call('EXISTS', KEYS[1]) == 0 then return 2 end
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local known = redis.call('HGET', KEYS[2], 'run_id')
if known == run then return 1 end
if not known then
  redis.call('HSET', KEYS[2], 'run_id', run)
  return 1
end
redis.log(redis.LOG_WARNING, 'seckill: ' .. KEYS[2] .. ' was written by the run ' .. known ..
  ', and this run is ' .. run .. ': the data may be old; dropping ' .. KEYS[1] .. ' so that it is rebuilt')
redis.call('DEL', KEYS[1])
return 0
