-- A Lua library of preload.lua and rebuild.lua (prepended, see `script::counting_units`).
-- The units in flight in a bucket: each pending ticket's `qty` (1 when it has none), its
-- record read in the bucket's slot. The meta's `pending_extra` (units beyond one per ticket) is
-- set from them, afresh.
local function units_in_flight(pending, meta)
  local prefix = string.sub(meta, 1, -5)
  local tickets = redis.call('ZRANGE', pending, 0, -1)
  local extra = 0
  for _, t in ipairs(tickets) do
    extra = extra + tonumber(redis.call('HGET', prefix .. 't:' .. t, 'qty') or '1') - 1
  end
  redis.call('HSET', meta, 'pending_extra', extra)
  return #tickets + extra
end
