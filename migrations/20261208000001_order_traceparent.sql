-- Issue 37: the order's trace (W3C traceparent, 55 characters), from its Kafka message, so that
-- its payment callback and its expiry link their spans to it. NULL when traces were off.
ALTER TABLE orders ADD COLUMN traceparent VARCHAR(55) NULL;
