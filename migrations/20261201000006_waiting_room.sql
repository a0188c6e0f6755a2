-- The waiting room (issue 13): a product may admit its buyers through a fair queue. NULL
-- `wr_admit_per_sec`: no waiting room (every product created before this).
ALTER TABLE products
    ADD COLUMN wr_admit_per_sec DOUBLE NULL,
    ADD COLUMN wr_max_admitted_factor DOUBLE NULL,
    ADD COLUMN wr_opens_at_ms BIGINT NULL;
