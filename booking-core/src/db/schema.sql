-- Booking-core schema (SQLite now; kept close to portable SQL for PostgreSQL later).
-- All timestamps are integer Unix epoch MILLISECONDS.
CREATE TABLE IF NOT EXISTS shows (
    id   TEXT PRIMARY KEY,
    name TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS seats (
    show_id         TEXT    NOT NULL,
    seat_id         TEXT    NOT NULL,
    section         TEXT    NOT NULL,
    seat_row        INTEGER NOT NULL,
    number          INTEGER NOT NULL,
    price_cents     BIGINT  NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'free' CHECK (status IN ('free', 'held', 'sold')),
    hold_id         TEXT,
    hold_expires_at BIGINT,
    PRIMARY KEY (show_id, seat_id)
);
CREATE INDEX IF NOT EXISTS seats_hold ON seats (hold_id);
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
    released_at        BIGINT
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
    status       INTEGER NOT NULL,
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
-- ref_id is the booking id for kind 'confirmation-email', the hold id for kind 'refund'.
CREATE TABLE IF NOT EXISTS outbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    ref_id     TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    created_at BIGINT  NOT NULL,
    sent_at    BIGINT,
    UNIQUE (ref_id, kind)
);
CREATE TABLE IF NOT EXISTS audit (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      BIGINT  NOT NULL,
    show_id TEXT,
    hold_id TEXT,
    seat_id TEXT,
    action  TEXT    NOT NULL,
    actor   TEXT    NOT NULL,
    reason  TEXT
);
