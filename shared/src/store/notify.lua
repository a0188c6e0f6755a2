-- A library prepended to every script that changes what a buyer sees of a ticket (its
-- status): `notify(record_key, ...)` tells every gateway, with one message on the bucket's
-- `events` channel (the record key with `t:<ticket>` replaced by `events`). Its payload is the
-- ticket, a space, and a JSON array of the record's fields and values as they are now
-- (HGETALL), followed by the extra field-value pairs passed as `...` (confirm.lua adds the
-- payment deadline, `pay_by`, which the record does not hold). Gateways subscribe to the
-- pattern of their namespace and push the new state to the ticket's open streams
-- (`GET /v1/orders/{ticket}/events`) without reading it again. A message nobody hears is
-- lost, which is fine: a gateway that was not subscribed re-reads its streams' tickets.
local function notify(record, ...)
  local prefix, ticket = string.match(record, '^(.*}:)t:([^:]+)$')
  if not prefix then return end
  local fields = redis.call('HGETALL', record)
  for _, v in ipairs({...}) do fields[#fields + 1] = v end
  local body = '[]'
  if #fields > 0 then body = cjson.encode(fields) end
  redis.call('PUBLISH', prefix .. 'events', ticket .. ' ' .. body)
end
