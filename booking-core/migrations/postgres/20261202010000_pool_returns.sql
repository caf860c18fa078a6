-- Issue 13 item 3 "No hot row for pools": a release no longer writes the pool row. It uncounts
-- its hold_pools row and appends the places here; the next guarded increment of the pool (which
-- locks the pool row anyway) folds the returns into `taken` in the same statement. Readers
-- count `taken - SUM(pool_returns.quantity)` as taken. `last_fit`: whether the last guarded
-- increment fitted (the statement's own answer, read back with RETURNING under its row lock).
-- Keep both backends in step.
CREATE TABLE IF NOT EXISTS pool_returns (
    id       BIGSERIAL PRIMARY KEY,
    show_id  TEXT   NOT NULL,
    pool_id  TEXT   NOT NULL,
    hold_id  TEXT   NOT NULL,
    quantity BIGINT NOT NULL CHECK (quantity > 0)
);
CREATE INDEX IF NOT EXISTS pool_returns_pool ON pool_returns (show_id, pool_id);
ALTER TABLE pools ADD COLUMN last_fit BIGINT NOT NULL DEFAULT 0;
