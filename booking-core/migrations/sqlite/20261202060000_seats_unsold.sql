-- Best available's read (`inventory::best::FREE_SQL`: a section's free seats, best first, the
-- first `best::PREFIX`) over the section's unsold seats only, in seat order: a partial index, so
-- the read stops after a prefix of free seats however many seats in front of them are sold.
-- Over `seats_layout` it walked past every sold seat (or read every free seat of the show through
-- `seats_status` and sorted them): 0.96 ms a read over 26,598 reads in one seed rehearsal, its
-- costliest statement, and 3.2 ms in the sold-out front of a section. Keep both backends in step.
CREATE INDEX IF NOT EXISTS seats_unsold ON seats (show_id, section, seat_row, number) WHERE status <> 'sold';
