-- Issue 5 "Released seats go to someone who wants them": a waitlist per show. A row claims
-- nothing; when a hold is released its seats are offered to the first waiting fan as a new
-- hold (status 'offered', hold_id set); a lapsed offer ends the row ('lapsed') and the seats go
-- to the next fan. 'skipped': the fan could not take a hold (a cap). Times epoch MILLISECONDS.
CREATE TABLE IF NOT EXISTS waitlist (
    show_id       TEXT   NOT NULL,
    visitor_id    TEXT   NOT NULL,
    admission_jti TEXT   NOT NULL,
    joined_at     BIGINT NOT NULL,
    status        TEXT   NOT NULL DEFAULT 'waiting',
    hold_id       TEXT,
    PRIMARY KEY (show_id, visitor_id)
);
CREATE INDEX IF NOT EXISTS waitlist_next ON waitlist (show_id, status, joined_at);
CREATE INDEX IF NOT EXISTS waitlist_hold ON waitlist (hold_id);
