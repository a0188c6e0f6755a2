-- A worker claims tickets of one product before it writes them to MySQL:
-- pending -> processing. A ticket already processing (a redelivery after a crash) stays claimed.
-- KEYS: 1.. ticket records
-- Returns one status per key: 'processing' when claimed, else the status found
-- ('confirmed', 'failed', or 'missing' when the record is gone).
local out = {}
for i, key in ipairs(KEYS) do
  local status = redis.call('HGET', key, 'status')
  if status == 'pending' then
    redis.call('HSET', key, 'status', 'processing')
    status = 'processing'
  end
  out[i] = status or 'missing'
end
return out
