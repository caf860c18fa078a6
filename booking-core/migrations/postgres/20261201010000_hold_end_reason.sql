-- Issue 17 item 6 "Expired is its own fact": why a RELEASED hold ended. `status` keeps its three
-- values (HELD, PAID, RELEASED) so every guarded update and every client stays as it was; the
-- reason sits beside it: 'expired' (it lapsed and the reconciler released it), 'released' (the
-- fan or an operator let it go), 'failed' (the payment failed and the hold ended because of it).
-- A column, not a new status: SQLite cannot alter the status CHECK in place (a rebuild of the
-- holds table and its references would be needed). NULL while HELD or PAID; a late success
-- (RELEASED → PAID) clears it. Keep both backends in step.
ALTER TABLE holds ADD COLUMN ended_as TEXT CHECK (ended_as IN ('expired', 'released', 'failed'));
-- Holds released before this column, read from their audit rows: the reconciler's release of a
-- failed payment says so in its reason ('payment failed'), its other releases were lapses, the
-- rest were let go (a fan's cancel after a failed payment included).
UPDATE holds SET ended_as = CASE
    WHEN EXISTS (SELECT 1 FROM audit a WHERE a.hold_id = holds.id AND a.action = 'released'
        AND a.actor = 'reconciler' AND a.reason LIKE 'payment failed%') THEN 'failed'
    WHEN EXISTS (SELECT 1 FROM audit a WHERE a.hold_id = holds.id AND a.action = 'released'
        AND a.actor = 'reconciler') THEN 'expired'
    ELSE 'released' END
WHERE status = 'RELEASED';
