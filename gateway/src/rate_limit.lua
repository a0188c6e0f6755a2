-- Per-user token bucket, shared by every gateway. Time comes from the Redis server, so the
-- gateways' clocks do not matter.
-- KEYS: 1 the user's bucket (hash: tokens, ts)
-- ARGV: 1 refill rate (tokens per second, > 0), 2 burst (bucket size, >= 1)
-- Returns {1, 0} when a token was taken, or {0, ms until the next token}.
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1])
local ts = tonumber(b[2])
if tokens == nil or ts == nil then
  tokens = burst
elseif now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000)
end
local allowed, wait = 0, 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  wait = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now)
-- A bucket left alone this long is full again, the same as no bucket.
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return {allowed, wait}
