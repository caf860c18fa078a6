-- Issue 4 leftovers and issue 5 (seed 001). All timestamps epoch MILLISECONDS. Keep both backends in step.

-- Channel whose hold/payment lifetimes the hold got (config `channels`).
ALTER TABLE holds ADD COLUMN channel TEXT NOT NULL DEFAULT 'web';
-- Late-success sweep: set once the gateway gave a final answer about a released hold's payment.
ALTER TABLE holds ADD COLUMN late_checked_at BIGINT;
-- ... and when to ask the gateway again about a released hold whose payment was still pending.
ALTER TABLE holds ADD COLUMN late_next_at BIGINT;
CREATE INDEX IF NOT EXISTS holds_late ON holds (status, late_checked_at, payment_expires_at);

-- Caps as slot rows claimed inside the hold's transaction (seed 001 "Caps and Abuse": a count
-- then an insert is a race). scope 'jti' = one live hold per admission, scope 'visitor' = the
-- per-holder cap. A slot is free when live_until <= now (the hold lapsed) or 0 (released/paid).
CREATE TABLE IF NOT EXISTS hold_slots (
    scope      TEXT   NOT NULL,
    owner      TEXT   NOT NULL,
    slot       BIGINT NOT NULL,
    hold_id    TEXT   NOT NULL,
    live_until BIGINT NOT NULL,
    PRIMARY KEY (scope, owner, slot)
);
CREATE INDEX IF NOT EXISTS hold_slots_hold ON hold_slots (hold_id);

-- General-admission pools: `taken` counts the units of every hold_pools row with counted = 1
-- (live holds, lapsed holds not yet reclaimed, and paid holds). Claim: one conditional update
-- taken + n <= capacity + oversell. Oversell is stored with who set it and when.
CREATE TABLE IF NOT EXISTS pools (
    show_id         TEXT   NOT NULL,
    pool_id         TEXT   NOT NULL,
    price_cents     BIGINT NOT NULL,
    capacity        BIGINT NOT NULL CHECK (capacity >= 0),
    oversell        BIGINT NOT NULL DEFAULT 0 CHECK (oversell >= 0),
    oversell_set_by TEXT,
    oversell_set_at BIGINT,
    taken           BIGINT NOT NULL DEFAULT 0 CHECK (taken >= 0),
    PRIMARY KEY (show_id, pool_id)
);
CREATE TABLE IF NOT EXISTS hold_pools (
    hold_id  TEXT   PRIMARY KEY,
    show_id  TEXT   NOT NULL,
    pool_id  TEXT   NOT NULL,
    quantity BIGINT NOT NULL CHECK (quantity > 0),
    counted  BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS hold_pools_pool ON hold_pools (show_id, pool_id, counted);
CREATE INDEX IF NOT EXISTS seats_layout ON seats (show_id, section, seat_row, number);
CREATE INDEX IF NOT EXISTS seats_status ON seats (show_id, status);
CREATE INDEX IF NOT EXISTS audit_seat ON audit (seat_id);
