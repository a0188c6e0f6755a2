-- A quantity per order (issue 38): a product caps the units one buyer may take in an order
-- (`max_per_buyer`, 1: one unit, as every product created before this), and each order, or
-- failed ticket, holds how many units it took (1 for every one before this).
ALTER TABLE products
    ADD COLUMN max_per_buyer SMALLINT UNSIGNED NOT NULL DEFAULT 1;
ALTER TABLE orders
    ADD COLUMN quantity SMALLINT UNSIGNED NOT NULL DEFAULT 1;
ALTER TABLE failed_tickets
    ADD COLUMN quantity SMALLINT UNSIGNED NOT NULL DEFAULT 1;
