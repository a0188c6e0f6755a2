-- A library prepended to every script that changes what a buyer sees of a ticket (its
-- status): `notify(record_key)` tells every gateway, with one message on the bucket's
-- `events` channel (the record key with `t:<ticket>` replaced by `events`), whose payload is
-- the ticket. Gateways subscribe to the pattern of their namespace and push the ticket's new
-- state to its open streams (`GET /v1/orders/{ticket}/events`). A message nobody hears is
-- lost, which is fine: a gateway that was not subscribed re-reads its streams' tickets.
local function notify(record)
  local prefix, ticket = string.match(record, '^(.*}:)t:([^:]+)$')
  if prefix then redis.call('PUBLISH', prefix .. 'events', ticket) end
end
