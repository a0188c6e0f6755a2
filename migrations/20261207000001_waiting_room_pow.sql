-- A proof of work before joining a waiting room (issue 36). NULL `wr_pow_max_bits`: no
-- proof of work (every product created before this, and any created without `pow`).
ALTER TABLE products
    ADD COLUMN wr_pow_min_bits TINYINT UNSIGNED NULL,
    ADD COLUMN wr_pow_max_bits TINYINT UNSIGNED NULL,
    ADD COLUMN wr_pow_target_jps DOUBLE NULL;
