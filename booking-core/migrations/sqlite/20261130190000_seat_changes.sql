-- The seat map's change feed (issue 13 item 6): every change of a seat's status, hold or
-- deadline stamps the seat with the next number of one counter, so a seat-map snapshot reads
-- only the seats changed since its cursor. SQLite has one writer: numbers commit in order.
ALTER TABLE seats ADD COLUMN change_seq BIGINT NOT NULL DEFAULT 0;
CREATE INDEX IF NOT EXISTS seats_change ON seats (show_id, change_seq);
CREATE TABLE IF NOT EXISTS seat_change_counter (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    seq BIGINT  NOT NULL
);
INSERT INTO seat_change_counter (id, seq) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
CREATE TRIGGER IF NOT EXISTS seats_changed AFTER UPDATE OF status, hold_id, hold_expires_at ON seats
BEGIN
    UPDATE seat_change_counter SET seq = seq + 1 WHERE id = 1;
    UPDATE seats SET change_seq = (SELECT seq FROM seat_change_counter WHERE id = 1)
     WHERE show_id = NEW.show_id AND seat_id = NEW.seat_id;
END;
