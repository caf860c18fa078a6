-- Issue 13: on PostgreSQL this migration moves the seat map's change feed off the seat row and
-- indexes the unsold seats by `sold`, so holds are HOT updates (see ../postgres/). SQLite has no
-- HOT updates and keeps its feed and index; it adds `sold` (computed when read) so that the
-- statements both backends share may name it.
ALTER TABLE seats ADD COLUMN sold INTEGER GENERATED ALWAYS AS (status = 'sold') VIRTUAL;
