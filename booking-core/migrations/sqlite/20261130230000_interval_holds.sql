-- Issue 17 items 1 and 2: interval resources. A hold of a named resource for [start_ms, end_ms)
-- (epoch MILLISECONDS, closed-open); the claimed range runs to until_ms = end_ms + the kind's
-- buffer. Keep both backends in step. SQLite has no exclusion constraint: a claim checks for a
-- blocking overlap and inserts in one BEGIN IMMEDIATE transaction under the single writer
-- (inventory/resources.rs); PostgreSQL's table carries EXCLUDE USING gist instead.
--
-- `blocking`: 1 while the hold is HELD or PAID; 0 once released or cleared as dead by a claim.
CREATE TABLE IF NOT EXISTS hold_resources (
    hold_id  TEXT    PRIMARY KEY REFERENCES holds (id),
    show_id  TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    resource TEXT    NOT NULL,
    start_ms INTEGER NOT NULL,
    end_ms   INTEGER NOT NULL,
    until_ms INTEGER NOT NULL,
    blocking INTEGER NOT NULL DEFAULT 1 CHECK (blocking IN (0, 1)),
    CHECK (start_ms < end_ms AND end_ms <= until_ms)
);
CREATE INDEX IF NOT EXISTS hold_resources_claims ON hold_resources (show_id, resource, blocking, start_ms);
CREATE INDEX IF NOT EXISTS hold_resources_kind ON hold_resources (show_id, kind, blocking);
