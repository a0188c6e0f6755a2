-- The per-user token bucket, shared by every gateway. Prepended to the scripts that take a
-- token: the gateway's rate_limit.lua, and reserve.lua, which takes it in the same call when
-- Redis is one server. Time comes from the Redis server, so the gateways' clocks do not
-- matter.
--
-- A user's bucket is the string "<tokens> <ts ms>" at its own key, written with SET ... PX
-- (the smallest encoding, and no separate expiry call): it expires once it would be full
-- again (bucket_life), the same as no bucket. A damaged bucket counts as full.

local function redis_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- How long a bucket takes to fill up again, plus a second, in ms. At most about 24 days (a
-- rate so small that it refills slower is refused by no setting, and must not turn an
-- expiry into a number Redis cannot read).
local function bucket_life(rate, burst)
  return math.min(math.ceil(burst * 1000 / rate) + 1000, 2147483647)
end

-- The limit's numbers from their ARGV strings; an error unless rate > 0 and burst >= 1 (the
-- settings refuse anything else, so this is a caller's bug, never a free pass).
local function bucket_limit(rate_s, burst_s)
  local rate, burst = tonumber(rate_s), tonumber(burst_s)
  if not (rate and rate > 0 and burst and burst >= 1) then
    error('a rate limit needs rate > 0 and burst >= 1, got ' .. tostring(rate_s) .. ' and '
      .. tostring(burst_s))
  end
  return rate, burst
end

-- bucket_take(value, rate, burst, now): takes a token from the bucket `value` (nil or false:
-- none), with rate and burst from bucket_limit. Returns 0 when a token was taken, else the ms
-- until the next token (at least 1, capped so that the reply stays an integer); and the
-- tokens left, for bucket_value. A bucket that reads as no number (nan) counts as full, and
-- what one holds is taken as between 0 and `burst` (a damaged count neither locks a buyer
-- out for longer than one token takes nor lets one through without limit).
local function bucket_take(value, rate, burst, now)
  local tokens = burst
  if value then
    local sep = string.find(value, ' ', 1, true)
    local left = sep and tonumber(string.sub(value, 1, sep - 1))
    local ts = sep and tonumber(string.sub(value, sep + 1))
    if left and ts and left == left and ts == ts then
      tokens = math.max(0, math.min(burst, left))
      if now > ts then tokens = math.min(burst, tokens + (now - ts) * rate / 1000) end
    end
  end
  if tokens >= 1 then return 0, tokens - 1 end
  return math.max(1, math.min(math.ceil((1 - tokens) * 1000 / rate), 2147483647)), tokens
end

-- The bucket's value: its tokens, and the time they were counted at (`now_s`, the ms as a
-- string: a caller that takes many tokens at one time formats it once).
local function bucket_value(tokens, now_s)
  return tostring(tokens) .. ' ' .. now_s
end

-- take_token(key, rate, burst): one token from the bucket at `key` (rate and burst as given
-- in ARGV), one GET, and one SET when a token was taken: a refused request writes nothing
-- (the bucket as it was still counts the same tokens, and expires when it should). A key that
-- holds another type is replaced: a damaged key never locks its buyer out. Returns what
-- bucket_take returns.
local function take_token(key, rate, burst)
  rate, burst = bucket_limit(rate, burst)
  local ok, value = pcall(redis.call, 'GET', key)
  local now = redis_ms()
  local wait, tokens = bucket_take(ok and value, rate, burst, now)
  if wait == 0 then
    redis.call('SET', key, bucket_value(tokens, string.format('%d', now)), 'PX',
      string.format('%d', bucket_life(rate, burst)))
  end
  return wait, tokens
end
