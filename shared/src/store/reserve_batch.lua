-- Reservations of several buyers of one stock bucket in one call: reserve.lua once per buyer,
-- in order, as the body of `reserve(KEYS, ARGV)` (prepended, after token_bucket.lua). The
-- gateway sends every buy that arrives while the bucket's previous call is in flight in the
-- next one, so a busy bucket pays Redis's per-call cost (the read, the script's setup, the
-- reply's write) once per batch, not once per buyer.
-- KEYS: 1 stock, 2 meta, 3 buyers, 4 pending, 5 admitted, 6 done, 7 queue, 8 borrowing (as
--       reserve.lua's 1-4 and 6-9), then per buyer: its ticket record, and its rate-limit
--       bucket when the buyer's rate is given
-- ARGV: 1 ticket ttl (s), 2 product id, then 7 per buyer: user id, ticket, now (ms), '1' when
--       the admission token was verified, the bucket count assumed, the limit's rate ('' for
--       none) and burst
-- Returns one reply per buyer, in order: reserve.lua's, or {0, message} when that buyer's
-- reservation raised an error (the others still count).
local out = {}
local k = 8
for i = 3, #ARGV, 7 do
  k = k + 1
  local keys = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[k], KEYS[5], KEYS[6], KEYS[7], KEYS[8]}
  local argv = {ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[1], ARGV[2], ARGV[i + 3], ARGV[i + 4]}
  if ARGV[i + 5] ~= '' then
    k = k + 1
    keys[10] = KEYS[k]
    argv[8] = ARGV[i + 5]
    argv[9] = ARGV[i + 6]
  end
  local ok, reply = pcall(reserve, keys, argv)
  if ok then
    out[#out + 1] = reply
  else
    if type(reply) == 'table' then reply = reply.err end
    out[#out + 1] = {0, tostring(reply)}
  end
end
return out
