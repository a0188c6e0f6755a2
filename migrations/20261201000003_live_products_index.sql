-- The sweeper lists the live products (loaded, not closed) on every sweep: an index keeps
-- that cheap however many finished sales the table holds.
CREATE INDEX products_live ON products (closed_at_ms, loaded_at_ms);
