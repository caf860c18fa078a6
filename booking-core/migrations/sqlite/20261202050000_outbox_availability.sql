-- The show's sold-out and reopen reports (`outbox::notify`: whether it stands reported sold
-- out, and whether a report is superseded by a later one), read by show without scanning the
-- outbox: a partial index of those two kinds only, so a session end or an email costs nothing
-- here. Keep both backends in step.
CREATE INDEX IF NOT EXISTS outbox_availability ON outbox (show_id, id) WHERE kind IN ('sold-out', 'reopen');
