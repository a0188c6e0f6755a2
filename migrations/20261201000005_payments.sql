-- The payment window (issue 12). A product has a price; a confirmed order must be paid by
-- `pay_by_ms`, or a worker cancels it and its unit goes back on sale.
ALTER TABLE products
    ADD COLUMN price BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN currency CHAR(3) NOT NULL DEFAULT 'CNY',
    -- 0: no window, a confirmed order is final (every product created before this).
    ADD COLUMN payment_window_secs BIGINT NOT NULL DEFAULT 0;

-- An order is `confirmed`, then `paid` or `cancelled`. Paying and cancelling each decide in
-- one conditional UPDATE of this row, so exactly one wins.
ALTER TABLE orders
    ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT 'confirmed',
    ADD COLUMN pay_by_ms BIGINT NULL,
    ADD COLUMN paid_at_ms BIGINT NULL,
    ADD COLUMN cancelled_at_ms BIGINT NULL,
    ADD COLUMN cancel_reason VARCHAR(32) NULL,
    -- 1 from the cancel's commit until the unit is back in Redis: whoever finds it set gives
    -- the unit back (the Redis script takes a `confirmed` ticket only, so exactly once).
    ADD COLUMN restore_due TINYINT NOT NULL DEFAULT 0,
    -- A cancelled order frees its buyer: one live order per (product, user).
    ADD COLUMN live_user_id BIGINT AS (IF(status = 'cancelled', NULL, user_id)) STORED;
CREATE INDEX orders_product_user_any ON orders (product_id, user_id);
ALTER TABLE orders DROP INDEX orders_product_user;
CREATE UNIQUE INDEX orders_product_live_user ON orders (product_id, live_user_id);
CREATE INDEX orders_due ON orders (status, pay_by_ms);
CREATE INDEX orders_restore_due ON orders (restore_due);

-- Payment attempts. One per (ticket, Idempotency-Key); the provider's callback settles it.
CREATE TABLE IF NOT EXISTS payments (
    payment_id      VARCHAR(40)  NOT NULL PRIMARY KEY,
    ticket          VARCHAR(64)  NOT NULL,
    user_id         BIGINT       NOT NULL,
    idempotency_key VARCHAR(255) NOT NULL,
    amount          BIGINT       NOT NULL,
    currency        CHAR(3)      NOT NULL,
    -- unsent (the provider was not reached), processing, succeeded, declined, refund_due
    status          VARCHAR(16)  NOT NULL,
    created_at_ms   BIGINT       NOT NULL,
    settled_at_ms   BIGINT       NULL,
    UNIQUE KEY payments_idempotency (ticket, idempotency_key),
    KEY payments_ticket_status (ticket, status)
) ENGINE = InnoDB;
