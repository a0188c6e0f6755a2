-- When the product was first loaded into Redis for sale (`preload`). A product that has been
-- loaded but has no Redis state was lost by Redis, and is reconciled without an operator.
ALTER TABLE products ADD COLUMN loaded_at_ms BIGINT NULL;
