-- When the sweeper found the sale over (sold out and settled, or ended, with nothing in
-- flight). A closed product is no longer swept, and its Redis keys expire after a grace
-- period; buys of it answer from MySQL.
ALTER TABLE products ADD COLUMN closed_at_ms BIGINT NULL;
