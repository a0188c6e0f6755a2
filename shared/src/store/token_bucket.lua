-- The per-user token bucket, shared by every gateway. Prepended to the scripts that take a
-- token: the gateway's rate_limit.lua, and reserve.lua, which takes it in the same call when
-- Redis is one server. Time comes from the Redis server, so the gateways' clocks do not matter.
-- take_token(key, rate, burst[, now[, found]]): the user's bucket (a string "<tokens> <ts ms>",
-- one GET and one SET ... PX: the smallest encoding, and no separate expiry call), its refill
-- rate (tokens per second, > 0) and size (>= 1), the Redis time in ms when the caller already
-- read it, and the bucket's value when the caller already read it (false: no bucket; a
-- caller that reads many buckets at once, with one MGET, skips their GETs). A bucket key that
-- holds another type is replaced: a damaged key never locks its buyer out.
-- Returns 0 when a token was taken, else the ms until the next token (at least 1); and the
-- bucket's new value.
local function take_token(key, rate, burst, now, found)
  rate = tonumber(rate)
  burst = tonumber(burst)
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local tokens = burst
  local b = found
  if b == nil then
    -- A key that holds something else than a string (damaged) counts as no bucket, and is
    -- replaced below, as it is when the caller read it with MGET.
    local ok, v = pcall(redis.call, 'GET', key)
    b = ok and v
  end
  if b then
    local sep = string.find(b, ' ', 1, true)
    local left = sep and tonumber(string.sub(b, 1, sep - 1))
    local ts = sep and tonumber(string.sub(b, sep + 1))
    if left and ts then
      tokens = left
      if now > ts then tokens = math.min(burst, tokens + (now - ts) * rate / 1000) end
    end
  end
  local wait = 0
  if tokens >= 1 then
    tokens = tokens - 1
  else
    -- Capped as the expiry below is, so the reply stays an integer the caller can read.
    wait = math.min(math.ceil((1 - tokens) * 1000 / rate), 2147483647)
  end
  -- A bucket left alone this long is full again, the same as no bucket. (At most about 24
  -- days: a rate so small that it refills slower is refused by no setting, and must not turn
  -- the expiry into a number Redis cannot read.)
  local ttl = math.min(math.ceil(burst * 1000 / rate) + 1000, 2147483647)
  local value = tostring(tokens) .. ' ' .. string.format('%d', now)
  redis.call('SET', key, value, 'PX', string.format('%d', ttl))
  return wait, value
end
