-- Record where the gateway's orders of one stock bucket landed in Kafka, when no reservation
-- call of that bucket could take them (record_locations, from locations.lua, is prepended).
-- KEYS: ticket records
-- ARGV: pairs (partition, offset) in the order of KEYS
-- Returns how many were recorded.
return record_locations(1, 1, #KEYS)
