-- Kafka locations of accepted orders (partition and offset, from the delivery reports), so
-- that the sweeper fails a pending ticket only once the consumer group has read past it.
-- Prepended to locate.lua and reserve.lua, which record a bucket's locations with its next
-- reservation. record_locations(first_key, first_arg, n): KEYS[first_key ..] are n ticket
-- records, ARGV[first_arg ..] their (partition, offset) pairs. Only existing records are
-- touched (an expired or lost one is not recreated): one EXISTS for all of them, one per
-- record only when some are gone. A record that cannot take its location (not a hash) is
-- skipped, so it costs the buyers of a reservation call nothing.
-- Returns how many were recorded.
local function record_locations(first_key, first_arg, n)
  if n == 0 then return 0 end
  local records = {}
  for j = 1, n do records[j] = KEYS[first_key + j - 1] end
  local all = redis.call('EXISTS', unpack(records)) == n
  local recorded = 0
  for j = 1, n do
    local a = first_arg + (j - 1) * 2
    if all or redis.call('EXISTS', records[j]) == 1 then
      if pcall(redis.call, 'HSET', records[j], 'kp', ARGV[a], 'ko', ARGV[a + 1]) then
        recorded = recorded + 1
      end
    end
  end
  return recorded
end
