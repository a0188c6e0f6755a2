-- Products on sale. `stock` is what is left to confirm; it never goes below zero.
CREATE TABLE IF NOT EXISTS products (
    id            BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name          VARCHAR(200) NOT NULL,
    stock         BIGINT      NOT NULL,
    initial_stock BIGINT      NOT NULL,
    starts_at_ms  BIGINT      NULL,
    ends_at_ms    BIGINT      NULL,
    created_at    TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    CONSTRAINT products_stock_non_negative CHECK (stock >= 0)
) ENGINE = InnoDB;

-- Confirmed orders. One row per ticket, and one per (product, user).
CREATE TABLE IF NOT EXISTS orders (
    id             BIGINT      NOT NULL AUTO_INCREMENT PRIMARY KEY,
    ticket         VARCHAR(64) NOT NULL,
    product_id     BIGINT      NOT NULL,
    user_id        BIGINT      NOT NULL,
    reserved_at_ms BIGINT      NOT NULL,
    created_at     TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    UNIQUE KEY orders_ticket (ticket),
    UNIQUE KEY orders_product_user (product_id, user_id)
) ENGINE = InnoDB;

-- Tickets that failed for good, so their status outlives the Redis copy.
CREATE TABLE IF NOT EXISTS failed_tickets (
    ticket     VARCHAR(64) NOT NULL PRIMARY KEY,
    product_id BIGINT      NOT NULL,
    user_id    BIGINT      NOT NULL,
    reason     VARCHAR(64) NOT NULL,
    failed_at  TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
    KEY failed_tickets_product (product_id)
) ENGINE = InnoDB;
