-- An admission whose session the booking core has ended (leave, hold PAID, hold released):
-- written in the same transaction as the `session-end` outbox message; such an admission may
-- no longer create holds (409 admission-ended). Times epoch MILLISECONDS.
CREATE TABLE IF NOT EXISTS admissions_ended (
    jti TEXT   PRIMARY KEY,
    at  BIGINT NOT NULL
);
