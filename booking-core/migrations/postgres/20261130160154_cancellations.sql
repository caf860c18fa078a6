-- Issue 13 item 5 "Payments at the edges" (case B14, operator refunds). All timestamps epoch
-- MILLISECONDS. Keep both backends in step.

-- A booking is 'active' until every one of its seats (or its pool places) is cancelled.
ALTER TABLE bookings ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
ALTER TABLE bookings ADD COLUMN cancelled_at BIGINT;
-- A seat of a PAID hold that was cancelled (refund by an operator, or at the gateway): it no
-- longer belongs to the booking; the seat itself went back to sale or to the waitlist.
ALTER TABLE hold_seats ADD COLUMN cancelled_at BIGINT;

-- One row per cancellation of a booking (in full or some of its seats). `id` is also the
-- idempotency key of the gateway refund it asks for. origin: 'operator' (back office) or
-- 'gateway' (refunded or charged back outside the shop). refund: 'pending' → 'refunded' (the
-- outbox worker refunded `amount_cents` at the gateway), 'none' (cancelled without a refund),
-- 'at-gateway' (the money went back at the gateway already).
CREATE TABLE IF NOT EXISTS cancellations (
    id           TEXT   PRIMARY KEY,
    booking_id   TEXT   NOT NULL,
    hold_id      TEXT   NOT NULL,
    show_id      TEXT   NOT NULL,
    seats        TEXT   NOT NULL,
    quantity     BIGINT NOT NULL DEFAULT 0,
    amount_cents BIGINT NOT NULL,
    origin       TEXT   NOT NULL,
    refund       TEXT   NOT NULL,
    refund_id    TEXT,
    operator     TEXT,
    reason       TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    done_at      BIGINT
);
CREATE INDEX IF NOT EXISTS cancellations_booking ON cancellations (booking_id);
CREATE INDEX IF NOT EXISTS cancellations_show ON cancellations (show_id, created_at);

-- What a waitlisted fan asked for: a pool's places (pool id), or seats (NULL).
ALTER TABLE waitlist ADD COLUMN pool_id TEXT;
