-- The seat map's change feed (issue 13 item 6): every change of a seat's status, hold or
-- deadline stamps the seat with the id of the transaction that wrote it. A reader takes the
-- oldest transaction still running at its snapshot (pg_snapshot_xmin) as its next cursor and
-- reads the seats stamped at or after it: a transaction that commits after the read has an id
-- at or above that cursor, so no change is missed across nodes.
ALTER TABLE seats ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS seats_change ON seats (show_id, change_seq);
CREATE OR REPLACE FUNCTION seats_mark_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.change_seq := pg_current_xact_id()::text::bigint;
    RETURN NEW;
END
$$;
CREATE TRIGGER seats_changed BEFORE UPDATE OF status, hold_id, hold_expires_at ON seats
    FOR EACH ROW EXECUTE FUNCTION seats_mark_change();
