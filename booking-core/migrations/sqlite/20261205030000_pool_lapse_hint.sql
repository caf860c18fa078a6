-- Issue 13: a pool's lapsed holds (expiry on read) were found from every lapsed hold of any
-- kind: the seed rehearsal's walk-aways left hundreds of lapsed seat holds between reconciler
-- steps, and each pool availability read and each refused pool claim probed hold_pools once
-- per lapsed hold (pg_stat_statements: 2.3 ms and 1.6 ms mean, together about 0.8 of a CPU).
-- lapses_at is a lower bound of the hold's deadline while its pool units may lapse: written
-- with the hold (its expires_at; the paths that move a deadline move it later: the extension
-- ladder, the B13 keep past the deadline), NULL once the hold is PAID. Readers take the rows
-- with lapses_at <= now from the index below and check the hold itself (HELD, past its
-- deadline, no alert): the bound narrows what they look at and never frees a live hold's
-- places (a bound later than the deadline would only count them free later).
-- The pool index takes the column last: the counted rows of a pool (drift) and their lapsed
-- ones (a range) from one index. Keep both backends in step.
ALTER TABLE hold_pools ADD COLUMN lapses_at BIGINT;
UPDATE hold_pools SET lapses_at =
    (SELECT h.expires_at FROM holds h WHERE h.id = hold_pools.hold_id AND h.status = 'HELD')
    WHERE counted = 1;
DROP INDEX IF EXISTS hold_pools_pool;
CREATE INDEX IF NOT EXISTS hold_pools_pool ON hold_pools (show_id, pool_id, counted, lapses_at);
