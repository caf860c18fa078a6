-- Issue 13: every hold and release of a seat changes its status and hold, and each index over
-- those columns took an entry per change (on PostgreSQL a new entry in every index of the
-- table: none of these updates can be HOT while an index covers a changed column). Two of them
-- served reads that other indexes serve:
-- * seats_hold (hold_id): a hold's seats are read through hold_seats' primary key (hold_id,
--   seat_id) and then by the seats' primary key (release, keep, the extension ladder).
--   After one PostgreSQL bench run it held 301 pages for 2,100 seats.
-- * seats_status (show_id, status): the reads of unsold seats use the partial index
--   seats_unsold (WHERE status <> 'sold'); the other counts read the show's seats anyway.
-- Keep both backends in step.
DROP INDEX IF EXISTS seats_hold;
DROP INDEX IF EXISTS seats_status;
