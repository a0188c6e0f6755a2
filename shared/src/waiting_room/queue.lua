-- The waiting room of one product: join, admit, and the caller's state, in one atomic step.
-- Every gateway runs it on each join and poll, so admission needs no coordinator: whoever
-- comes first after time has passed admits the places that time has earned.
--
-- Places: a buyer who joins before the sale starts gets a uniformly random score from a
-- CSPRNG (ARGV[5], below 2^50); one who joins after gets 2^51 + arrival number, behind every
-- early joiner, first come first served. The queue is sorted by score.
-- Admission, after the start: `admit_per_sec` places a second (credit accrues with time, at
-- most one second's worth banked), the lowest scores first, while admitted-not-bought stays
-- within ceil(factor × units left / max_per_buyer): an admission allows one order of up to
-- max_per_buyer units. The units in flight are the pending set's size and the meta's
-- `pending_extra`. An admission lasts ARGV[6] ms; one that lapses is
-- `expired` (the place is given up). reserve.lua ends an admission when its buyer buys.
--
-- KEYS: 1 stock, 2 meta, 3 pending, 4 queue (zset user -> score), 5 admitted (zset user ->
--       admission expiry ms), 6 done (hash user -> 'expired' | 'bought'), 7 ids (hash user ->
--       queue id), 8 proof-of-work challenges used (zset nonce -> challenge expiry ms)
-- A proof of work (meta `wr_pow_max` set): a join of a buyer not in the room needs a solved
-- challenge, which the gateway checks before this script and this script marks used (ARGV[7],
-- its nonce; ARGV[8], its expiry). A join without one is counted, per one-second window
-- (`wr_jw`, `wr_jc`, and `wr_jp` for the window before), and answered with the joins over
-- the last second, from which the gateway sets the challenge's difficulty.
-- The admission rate actually measured: admissions per second over windows of at least 2 s
-- (`wr_obs`), from the start on, for an honest estimated wait.
--
-- ARGV: 1 now (ms), 2 user id, 3 'join', 'poll' or 'tick', 4 a new queue id (join), 5 a random
--       score below 2^50 (join), 6 admission ttl (ms), 7 the proof of work's nonce (join; ''
--       without one), 8 its challenge's expiry (ms), 9 how long a used challenge is kept
--       past its expiry (ms)
-- Returns {kind, ...}:
--   {'unknown_product'} | {'no_waiting_room'} | {'not_open'} | {'none'} (never joined)
--   {'waiting', queue id, rank (0-based; -1 before the start), sold out (0/1), admit per sec,
--    starts at, measured per sec ('' before a window closed), unlikely (0/1: the places ahead
--    and the admitted who have not bought outnumber the units left and in flight), admitted
--    so far (read with the rank: a place moves up by exactly what this grows by), admissions
--    taken back to the head of the line so far (reserve.lua: while it does not grow)}
--   {'tick', admitted so far, sold out (0/1), admit per sec, starts at, measured per sec or
--    '', units left, units in flight, admitted who have not bought, taken back, ended (0/1)}
--    for 'tick', which only admits (a gateway's live streams of the room drive admission so)
--   {'admitted', queue id, admission expiry}
--   {'expired', queue id} | {'bought', queue id}
--   {'ended', queue id}: the sale is past its end (meta `ends_at`) and this entry was neither
--    bought nor expired: final (nobody is admitted after the end)
--   {'sale_ended'}: a join of a buyer who never joined, after the end (nothing is added)
--   {'challenge', joins over the last second, min bits, max bits, target joins per sec}: a
--    join without a proof of work, of a buyer who never joined (nothing is added)
--   {'challenge_used'}: a join whose challenge was used before (nothing is done)
local now = tonumber(ARGV[1])
local stock = redis.call('GET', KEYS[1])
if not stock then return {'unknown_product'} end
stock = tonumber(stock)
local m = redis.call('HMGET', KEYS[2], 'wr_rate', 'wr_factor', 'wr_opens', 'starts_at', 'wr_credit', 'wr_last',
  'wr_obs_t', 'wr_obs_a', 'wr_obs', 'wr_admitted', 'wr_returned', 'ends_at',
  'wr_pow_min', 'wr_pow_max', 'wr_pow_target', 'wr_jw', 'wr_jc', 'wr_jp', 'max_per_buyer',
  'pending_extra')
local most = tonumber(m[19] or '1')
local function units_in_flight()
  return redis.call('ZCARD', KEYS[3]) + tonumber(m[20] or '0')
end
if not m[1] then return {'no_waiting_room'} end
local rate, factor, opens = tonumber(m[1]), tonumber(m[2]), tonumber(m[3] or '0')
local starts = tonumber(m[4] or m[3] or '0')
local user = ARGV[2]
local ended = m[12] ~= false and now >= tonumber(m[12])

if ARGV[3] == 'join' then
  if now < opens then return {'not_open'} end
  local joined = redis.call('HGET', KEYS[7], user)
  if ended and not joined then return {'sale_ended'} end
  if m[14] and ARGV[7] ~= '' then
    -- Each challenge once: kept until a minute after it expires (ARGV[9]), so that a gateway
    -- whose clock runs ahead does not forget one that another still takes.
    redis.call('ZREMRANGEBYSCORE', KEYS[8], '-inf', now - tonumber(ARGV[9]))
    if redis.call('ZADD', KEYS[8], 'NX', ARGV[8], ARGV[7]) == 0 then return {'challenge_used'} end
  elseif m[14] and not joined then
    local w = math.floor(now / 1000)
    local jw, jc, jp = tonumber(m[16] or '-1'), tonumber(m[17] or '0'), tonumber(m[18] or '0')
    if w ~= jw then
      if w == jw + 1 then jp = jc else jp = 0 end
      jc = 0
    end
    jc = jc + 1
    redis.call('HSET', KEYS[2], 'wr_jw', w, 'wr_jc', jc, 'wr_jp', jp)
    local rate = jp * (1 - (now % 1000) / 1000) + jc
    return {'challenge', tostring(rate), m[13] or '0', m[14], m[15] or '50'}
  end
  if not joined then
    redis.call('HSET', KEYS[7], user, ARGV[4])
    local score
    if now < starts then
      score = tonumber(ARGV[5])
    else
      score = 2 ^ 51 + redis.call('HINCRBY', KEYS[2], 'wr_seq', 1)
    end
    redis.call('ZADD', KEYS[4], score, user)
  end
end

if now >= starts and not ended then
  -- Admissions that lapsed give their places up.
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now)
  for _, u in ipairs(lapsed) do redis.call('HSET', KEYS[6], u, 'expired') end
  if #lapsed > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now) end
  local last = tonumber(m[6] or '0')
  if last < starts then last = starts end
  local credit = tonumber(m[5] or '0') + (now - last) * rate / 1000
  local bank = math.max(rate, 1)
  if credit > bank then credit = bank end
  local room = math.ceil(factor * math.max(stock, 0) / most) - redis.call('ZCARD', KEYS[5])
  local n = math.min(math.floor(credit), room)
  local total = tonumber(m[10] or '0')
  if n > 0 then
    local popped = redis.call('ZPOPMIN', KEYS[4], n)
    for i = 1, #popped, 2 do redis.call('ZADD', KEYS[5], now + tonumber(ARGV[6]), popped[i]) end
    credit = credit - #popped / 2
    total = redis.call('HINCRBY', KEYS[2], 'wr_admitted', #popped / 2)
  end
  redis.call('HSET', KEYS[2], 'wr_credit', tostring(credit), 'wr_last', now)
  -- The measured rate: the first window opens at the start, with nobody admitted yet.
  local obs_t, obs_a = tonumber(m[7] or '0'), tonumber(m[8] or '0')
  if obs_t < starts then obs_t, obs_a = starts, 0 end
  if now - obs_t >= 2000 then
    m[9] = tostring((total - obs_a) * 1000 / (now - obs_t))
    redis.call('HSET', KEYS[2], 'wr_obs_t', now, 'wr_obs_a', total, 'wr_obs', m[9])
  elseif tonumber(m[7] or '0') < starts then
    redis.call('HSET', KEYS[2], 'wr_obs_t', obs_t, 'wr_obs_a', obs_a)
  end
  m[10] = tostring(total)
end
local sold_out = 0
if stock <= 0 and redis.call('ZCARD', KEYS[3]) == 0 then sold_out = 1 end
if ARGV[3] == 'tick' then
  return {'tick', m[10] or '0', sold_out, tostring(rate), tostring(starts), m[9] or '',
    stock, units_in_flight(), redis.call('ZCARD', KEYS[5]), m[11] or '0', ended and 1 or 0}
end

local id = redis.call('HGET', KEYS[7], user)
if not id then return {'none'} end
local done = redis.call('HGET', KEYS[6], user)
if done then return {done, id} end
if ended then return {'ended', id} end
local until_ms = redis.call('ZSCORE', KEYS[5], user)
if until_ms then return {'admitted', id, until_ms} end
local rank = redis.call('ZRANK', KEYS[4], user)
if not rank then return {'none'} end
local unlikely = 0
if now < starts then
  rank = -1
elseif rank + 1 + redis.call('ZCARD', KEYS[5]) > math.max(stock, 0) + units_in_flight() then
  unlikely = 1
end
return {'waiting', id, rank, sold_out, tostring(rate), tostring(starts), m[9] or '', unlikely,
  m[10] or '0', m[11] or '0'}
