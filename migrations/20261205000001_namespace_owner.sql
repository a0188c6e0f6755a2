-- The namespace (SECKILL_NAMESPACE) this database belongs to: one row, written by the first
-- process that starts against it. A gateway or worker of another namespace refuses to start
-- here: it would take this deployment's products for ones its own Redis lost, and rebuild
-- them into its Redis, selling the same MySQL stock twice.
CREATE TABLE namespace_owner (
    id TINYINT NOT NULL PRIMARY KEY,
    namespace VARCHAR(64) NOT NULL,
    claimed_at_ms BIGINT NOT NULL,
    CONSTRAINT one_owner CHECK (id = 1)
);
