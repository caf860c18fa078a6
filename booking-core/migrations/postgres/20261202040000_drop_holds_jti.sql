-- `holds_jti (admission_jti, status)` served no query: an admission's live hold is found through
-- its cap slot (`hold_slots`, scope 'jti'), and a hold is read by id. It cost an entry per new
-- hold and per status change (`pg_stat_user_indexes` after a bench run: 0 scans, 418 pages).
-- Keep both backends in step.
DROP INDEX IF EXISTS holds_jti;
