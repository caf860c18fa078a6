-- Booking-core schema for SQLite (embedded default).
-- All timestamps are integer Unix epoch MILLISECONDS. Keep in step with ../postgres/.

CREATE TABLE IF NOT EXISTS shows (
    id   TEXT PRIMARY KEY,
    name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS seats (
    show_id         TEXT    NOT NULL,
    seat_id         TEXT    NOT NULL,
    section         TEXT    NOT NULL,
    seat_row        BIGINT  NOT NULL,
    number          BIGINT  NOT NULL,
    price_cents     BIGINT  NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'free' CHECK (status IN ('free', 'held', 'sold')),
    hold_id         TEXT,
    hold_expires_at BIGINT,
    PRIMARY KEY (show_id, seat_id)
);
CREATE INDEX IF NOT EXISTS seats_hold ON seats (hold_id);
-- query_failures/extensions/alerted_at: the reconciler's extension ladder (DESIGN "Reconciler").
CREATE TABLE IF NOT EXISTS holds (
    id                 TEXT    PRIMARY KEY,
    show_id            TEXT    NOT NULL,
    visitor_id         TEXT    NOT NULL,
    admission_jti      TEXT    NOT NULL,
    status             TEXT    NOT NULL CHECK (status IN ('HELD', 'PAID', 'RELEASED')),
    amount_cents       BIGINT  NOT NULL,
    expires_at         BIGINT  NOT NULL,
    payment_expires_at BIGINT  NOT NULL,
    payment_id         TEXT    UNIQUE,
    payment_signature  TEXT,
    checkout_url       TEXT,
    executing_at       BIGINT,
    transaction_id     TEXT,
    created_at         BIGINT  NOT NULL,
    paid_at            BIGINT,
    released_at        BIGINT,
    query_failures     BIGINT  NOT NULL DEFAULT 0,
    extensions         BIGINT  NOT NULL DEFAULT 0,
    alerted_at         BIGINT
);
CREATE INDEX IF NOT EXISTS holds_jti ON holds (admission_jti, status);
CREATE INDEX IF NOT EXISTS holds_due ON holds (status, expires_at);
CREATE TABLE IF NOT EXISTS hold_seats (
    hold_id TEXT NOT NULL,
    show_id TEXT NOT NULL,
    seat_id TEXT NOT NULL,
    PRIMARY KEY (hold_id, seat_id)
);
CREATE TABLE IF NOT EXISTS idempotency (
    visitor_id   TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    request_hash TEXT    NOT NULL,
    status       BIGINT  NOT NULL,
    body         TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    UNIQUE (visitor_id, key)
);
CREATE TABLE IF NOT EXISTS bookings (
    id             TEXT   PRIMARY KEY,
    hold_id        TEXT   NOT NULL UNIQUE,
    show_id        TEXT   NOT NULL,
    visitor_id     TEXT   NOT NULL,
    transaction_id TEXT   NOT NULL,
    created_at     BIGINT NOT NULL
);
-- Webhook event ids already processed (DESIGN: de-duplicated in the same transaction).
CREATE TABLE IF NOT EXISTS webhook_events (
    id          TEXT   PRIMARY KEY,
    payment_id  TEXT,
    received_at BIGINT NOT NULL
);
-- Refunds of payments that completed after their seats were gone (case B02); one per hold.
CREATE TABLE IF NOT EXISTS refunds (
    hold_id        TEXT   PRIMARY KEY,
    show_id        TEXT   NOT NULL,
    payment_id     TEXT   NOT NULL,
    transaction_id TEXT   NOT NULL,
    amount_cents   BIGINT NOT NULL,
    refund_id      TEXT,
    status         TEXT   NOT NULL CHECK (status IN ('pending', 'refunded')),
    created_at     BIGINT NOT NULL,
    done_at        BIGINT
);
-- Named leases with an owner token: the single reconciler, the token refresher.
CREATE TABLE IF NOT EXISTS leases (
    name        TEXT   PRIMARY KEY,
    owner       TEXT   NOT NULL,
    lease_until BIGINT NOT NULL
);
-- The gateway access token shared by every booking-core process (seed 000, Challenge 3).
CREATE TABLE IF NOT EXISTS gateway_token (
    id         BIGINT PRIMARY KEY,
    token      TEXT   NOT NULL,
    expires_at BIGINT NOT NULL,
    fetched_at BIGINT NOT NULL
);

-- ref_id: booking id for 'confirmation-email', hold id for 'refund' and 'refund-notice'.
CREATE TABLE IF NOT EXISTS outbox (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    ref_id        TEXT   NOT NULL,
    kind          TEXT   NOT NULL,
    show_id       TEXT,
    payload       TEXT   NOT NULL,
    created_at    BIGINT NOT NULL,
    sent_at       BIGINT,
    attempts      BIGINT NOT NULL DEFAULT 0,
    claimed_by    TEXT,
    claimed_until BIGINT,
    last_error    TEXT,
    UNIQUE (ref_id, kind)
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox (sent_at, id);
CREATE TABLE IF NOT EXISTS audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      BIGINT NOT NULL,
    show_id TEXT,
    hold_id TEXT,
    seat_id TEXT,
    action  TEXT   NOT NULL,
    actor   TEXT   NOT NULL,
    reason  TEXT
);
CREATE INDEX IF NOT EXISTS audit_hold ON audit (hold_id);
-- Operator alerts: holds whose payment outcome stayed unknown after three extensions.
CREATE TABLE IF NOT EXISTS alerts (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      BIGINT NOT NULL,
    show_id TEXT,
    hold_id TEXT   UNIQUE,
    kind    TEXT   NOT NULL,
    message TEXT   NOT NULL
);
