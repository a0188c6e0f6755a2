-- The sweeper's trim of a stock bucket's `located` list (locate.lua): drops entries from its
-- head while none of their tickets is in flight (in the pending set, which holds a ticket
-- from its reservation until it is settled). An entry with a ticket in flight ends the trim,
-- so the list keeps its order and stays about as long as the orders in flight.
-- KEYS: 1 located, 2 pending
-- ARGV: 1 entries to look at, at most
-- Returns how many entries were dropped.
local dropped = 0
for _ = 1, tonumber(ARGV[1]) do
  local entry = redis.call('LINDEX', KEYS[1], 0)
  if not entry then break end
  local tickets, n = {}, 0
  for word in string.gmatch(entry, '%S+') do
    n = n + 1
    if n % 3 == 1 then tickets[#tickets + 1] = word end
  end
  -- ZMSCORE takes as many members as Lua's unpack can give: an entry holds at most 64.
  if #tickets > 0 then
    for _, score in ipairs(redis.call('ZMSCORE', KEYS[2], unpack(tickets))) do
      if score then return dropped end
    end
  end
  redis.call('LPOP', KEYS[1])
  dropped = dropped + 1
end
return dropped
