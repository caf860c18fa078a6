-- Issue 18 item 1 "A checkout that always has a way forward": payment attempts per hold
-- (DECISIONS "Booking core": paying again after a cancel). All timestamps epoch MILLISECONDS.
-- Keep both backends in step.
--
-- `holds.payment_id` stays the hold's CURRENT attempt (every confirm path, the callback, the
-- webhook and the reconciler read only it). This table keeps every attempt a hold ever had:
-- 'current' (the one in `holds.payment_id`), 'superseded' (the fan paid again after it died: the
-- reconciler voids it at the gateway), 'voided' (the gateway confirmed it cannot complete), or
-- 'alerted' (the gateway said a superseded attempt completed: an operator must refund it).
-- `signature` is the gateway's per-payment signature (a callback from a superseded attempt's
-- checkout is still verified). `gateway_status` is the last final answer the gateway gave about
-- the attempt (cancelled, failed, expired), which the booking page shows to offer paying again.
CREATE TABLE IF NOT EXISTS payment_attempts (
    payment_id     TEXT   PRIMARY KEY,
    hold_id        TEXT   NOT NULL,
    attempt        BIGINT NOT NULL,
    status         TEXT   NOT NULL CHECK (status IN ('current', 'superseded', 'voided', 'alerted')),
    signature      TEXT,
    gateway_status TEXT,
    created_at     BIGINT NOT NULL,
    superseded_at  BIGINT,
    voided_at      BIGINT,
    UNIQUE (hold_id, attempt)
);
CREATE INDEX IF NOT EXISTS payment_attempts_status ON payment_attempts (status, superseded_at);
-- Holds that had a payment before this table: their payment is attempt 1 and current.
INSERT INTO payment_attempts (payment_id, hold_id, attempt, status, signature, created_at)
SELECT payment_id, id, 1, 'current', payment_signature, created_at FROM holds
WHERE payment_id IS NOT NULL AND payment_id NOT LIKE 'pending:%';
