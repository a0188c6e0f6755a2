-- Stock buckets (issue 14): a hot product's Redis stock may be split over several buckets
-- (hash tags), so that a Redis Cluster spreads its load. 1: one piece, as every product
-- created before this.
ALTER TABLE products
    ADD COLUMN buckets SMALLINT UNSIGNED NOT NULL DEFAULT 1;
