-- Issue 13 item 3 "No hot row for pools" (see ../postgres/): on SQLite, with one writer, a
-- release still decrements `taken` itself and this table stays empty; readers count
-- `taken - SUM(pool_returns.quantity)` as taken on both backends. Keep both backends in step.
CREATE TABLE IF NOT EXISTS pool_returns (
    id       INTEGER PRIMARY KEY AUTOINCREMENT,
    show_id  TEXT   NOT NULL,
    pool_id  TEXT   NOT NULL,
    hold_id  TEXT   NOT NULL,
    quantity BIGINT NOT NULL CHECK (quantity > 0)
);
CREATE INDEX IF NOT EXISTS pool_returns_pool ON pool_returns (show_id, pool_id);
ALTER TABLE pools ADD COLUMN last_fit BIGINT NOT NULL DEFAULT 0;
