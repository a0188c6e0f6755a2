-- The sweeper's trim of a stock bucket's `located` list (locate.lua): drops entries from its
-- head while each was made only of orders reserved before the oldest ticket in flight. An
-- entry starts with the newest reservation time among its orders; every ticket in flight is
-- in the pending set, scored by its reservation time, so an entry whose newest time is below
-- the set's lowest score holds no ticket in flight (and a ticket's location is only recorded
-- after its reservation, so none joins the set later). An entry that may hold one ends the
-- trim, so the list keeps its order and stays about as long as the orders in flight. It costs
-- one read of the set per call and nothing per order.
-- KEYS: 1 located, 2 pending
-- ARGV: 1 entries to look at, at most
-- Returns how many entries were dropped.
local oldest = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')[2]
oldest = oldest and tonumber(oldest)
local dropped = 0
for _ = 1, tonumber(ARGV[1]) do
  local entry = redis.call('LINDEX', KEYS[1], 0)
  if not entry then break end
  if oldest then
    local newest = tonumber(string.match(entry, '^%S+'))
    if not (newest and newest < oldest) then break end
  end
  redis.call('LPOP', KEYS[1])
  dropped = dropped + 1
end
return dropped
