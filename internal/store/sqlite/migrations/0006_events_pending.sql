-- The store's statements are shared with PostgreSQL and test boolean
-- columns bare (WHERE pending). SQLite uses a partial index only for a
-- query that states the index's own condition, so the pending index is
-- rebuilt on that condition (it was pending = 1).
DROP INDEX events_pending;
CREATE INDEX events_pending ON events (session_id, seq) WHERE pending;
