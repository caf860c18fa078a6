-- Issue 13: seat holds and releases as HOT updates. A hold, its release and a deadline change
-- rewrite a seat's status, hold and deadline; while an index covers any of those columns no
-- such update is HOT, so each wrote a new entry into every index of `seats`, and every lookup
-- of a hot seat walked its dead versions (the read before a hold: 70 buffers for two seats in a
-- bench run). After this migration no index of `seats` covers a column a hold changes:
-- * The change feed moves off the seat row: the writing transaction's id goes into an
--   append-only log, `seat_changes`, one row per changed seat, written by a statement-level
--   trigger (so no write path can forget it). The seat map reads the seats whose ids the log
--   has at or after its cursor (`inventory::seatmap`); `seats.change_seq` and its index go.
--   The log is pruned after `seatmap::FEED_KEPT_MS`; `at_ms` (the database's clock, epoch ms)
--   is what the pruning reads, through a BRIN index (the log is written in time order).
-- * The unsold seats' index (best available) covers `sold`, a stored generated column that
--   changes only when a seat is sold or a sale is cancelled: a hold keeps it false.
-- * Seat pages keep 30 % free (`fillfactor`), the room a HOT update needs on the same page.
-- SQLite has no HOT updates: its migration of this name adds `sold` only, so the statements
-- both backends share may name it.
ALTER TABLE seats SET (fillfactor = 70);
ALTER TABLE seats ADD COLUMN sold BOOLEAN GENERATED ALWAYS AS (status = 'sold') STORED;
DROP INDEX IF EXISTS seats_unsold;
CREATE INDEX IF NOT EXISTS seats_unsold ON seats (show_id, section, seat_row, number) WHERE NOT sold;
CREATE TABLE IF NOT EXISTS seat_changes (
    show_id    TEXT   NOT NULL,
    change_seq BIGINT NOT NULL,
    seat_id    TEXT   NOT NULL,
    at_ms      BIGINT NOT NULL DEFAULT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)
);
CREATE INDEX IF NOT EXISTS seat_changes_feed ON seat_changes (show_id, change_seq);
CREATE INDEX IF NOT EXISTS seat_changes_at ON seat_changes USING brin (at_ms);
DROP TRIGGER IF EXISTS seats_changed ON seats;
DROP FUNCTION IF EXISTS seats_mark_change();
ALTER TABLE seats DROP COLUMN IF EXISTS change_seq;
CREATE OR REPLACE FUNCTION seats_log_changes() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO seat_changes (show_id, change_seq, seat_id)
    SELECT c.show_id, CAST(CAST(pg_current_xact_id() AS TEXT) AS BIGINT), c.seat_id FROM changed c;
    RETURN NULL;
END
$$;
CREATE TRIGGER seats_changes_logged AFTER UPDATE ON seats REFERENCING NEW TABLE AS changed
    FOR EACH STATEMENT EXECUTE FUNCTION seats_log_changes();
