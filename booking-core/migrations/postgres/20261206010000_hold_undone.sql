-- Issue 13 item 2 ("one round trip on PostgreSQL"): a plain named-seat hold is one
-- data-modifying statement outside an explicit transaction (inventory::onetrip). Its guarded
-- update runs first and every write after it is conditional on that update's rows, so a hold
-- lost at the update writes nothing and commits nothing. When the update took the seats but
-- a later part refused (the key was stored meanwhile, a cap slot was taken meanwhile: races the
-- read before the hold did not see), the statement must not commit its half: it calls this
-- function, whose error aborts the statement's implicit transaction whole, and the service
-- runs the hold again through the full path, which decides the refusal with every rule.
-- SQLSTATE BH001 (class BH: booking holds, outside the classes PostgreSQL defines) names it.
-- SQLite has no twin: its holds run on the writer thread inside a savepoint it rolls back.
CREATE OR REPLACE FUNCTION hold_undone(why TEXT) RETURNS TEXT LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'hold undone: %', why USING ERRCODE = 'BH001';
END
$$;
