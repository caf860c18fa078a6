-- Issue 17 items 1 and 2: interval resources. A hold of a named resource for [start_ms, end_ms)
-- (epoch MILLISECONDS, closed-open); the claimed range runs to until_ms = end_ms + the kind's
-- buffer, so the buffer is part of what the database refuses to overlap. Keep both backends in
-- step (SQLite: the same table, checked under the single writer, inventory/resources.rs).
--
-- `blocking` is 1 while the hold can still become or is a booking (HELD, PAID); it is set to 0
-- when the hold is released, or when a new claim finds the hold dead in its way (HELD past its
-- deadline, not kept by the reconciler), in that claim's own transaction. The exclusion
-- constraint is partial on it: only blocking claims of one resource may not overlap.
CREATE EXTENSION IF NOT EXISTS btree_gist;

CREATE TABLE IF NOT EXISTS hold_resources (
    hold_id  TEXT     PRIMARY KEY REFERENCES holds (id),
    show_id  TEXT     NOT NULL,
    kind     TEXT     NOT NULL,
    resource TEXT     NOT NULL,
    start_ms BIGINT   NOT NULL,
    end_ms   BIGINT   NOT NULL,
    until_ms BIGINT   NOT NULL,
    blocking BIGINT   NOT NULL DEFAULT 1 CHECK (blocking IN (0, 1)),
    during   INT8RANGE GENERATED ALWAYS AS (int8range(start_ms, until_ms, '[)')) STORED,
    CHECK (start_ms < end_ms AND end_ms <= until_ms),
    CONSTRAINT hold_resources_no_overlap
        EXCLUDE USING gist (show_id WITH =, resource WITH =, during WITH &&) WHERE (blocking = 1)
);
CREATE INDEX IF NOT EXISTS hold_resources_kind ON hold_resources (show_id, kind, blocking);
