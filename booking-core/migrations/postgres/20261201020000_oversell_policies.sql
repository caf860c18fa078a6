-- Issue 17 item 5 "Overbooking as policy" (seed 001 "Overbooking Is a Policy"). All timestamps
-- epoch MILLISECONDS. Keep both backends in step.

-- The written policy behind a pool's oversell allowance, versioned per pool: a new policy
-- supersedes the current one (superseded_at set), the old one is kept. allowance 0 (back to no
-- oversell) is stored too, with no_show_rate, sample and offers empty.
-- no_show_rate: the measured share of bookings that do not show (0..1), on `sample` (words).
-- move_order: 'latest-booking-first' or 'earliest-booking-first'. offers: a JSON array of what
-- an affected fan is offered ({"kind":"upgrade","pool"} / {"kind":"refund-plus-compensation",
-- "compensation_cents"} / {"kind":"later-date","show"}).
CREATE TABLE IF NOT EXISTS oversell_policies (
    show_id       TEXT   NOT NULL,
    pool_id       TEXT   NOT NULL,
    version       BIGINT NOT NULL,
    allowance     BIGINT NOT NULL CHECK (allowance >= 0),
    capacity      BIGINT NOT NULL,
    no_show_rate  DOUBLE PRECISION,
    sample        TEXT,
    move_order    TEXT,
    offers        TEXT   NOT NULL DEFAULT '[]',
    operator      TEXT   NOT NULL,
    set_at        BIGINT NOT NULL,
    superseded_at BIGINT,
    PRIMARY KEY (show_id, pool_id, version)
);

-- One decision per oversold booking (the primary key makes it once): action 'move' (to
-- to_pool), 'compensate' (amount_cents back at the gateway through cancellations +
-- the outbox, the booking stays) or 'refund' (the booking cancelled and refunded).
-- policy_version: the pool's policy in force when the operator decided.
CREATE TABLE IF NOT EXISTS oversell_resolutions (
    booking_id      TEXT   PRIMARY KEY,
    show_id         TEXT   NOT NULL,
    pool_id         TEXT   NOT NULL,
    action          TEXT   NOT NULL,
    to_pool         TEXT,
    amount_cents    BIGINT NOT NULL DEFAULT 0,
    cancellation_id TEXT,
    policy_version  BIGINT NOT NULL,
    operator        TEXT   NOT NULL,
    created_at      BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS oversell_resolutions_pool ON oversell_resolutions (show_id, pool_id);
