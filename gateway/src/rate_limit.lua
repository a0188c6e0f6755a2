-- Per-user token bucket (take_token, from token_bucket.lua, is prepended), one call per buy
-- when Redis is a cluster: the bucket lives in the buyer's own slot, not the product's.
-- KEYS: 1 the user's bucket (a string "<tokens> <ts>")
-- ARGV: 1 refill rate (tokens per second, > 0), 2 burst (bucket size, >= 1)
-- Returns {1, 0} when a token was taken, or {0, ms until the next token}.
local wait = take_token(KEYS[1], ARGV[1], ARGV[2])
if wait == 0 then return {1, 0} end
return {0, wait}
