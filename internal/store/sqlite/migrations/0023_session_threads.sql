-- Threads of multi-agent sessions. A session's threads share its one
-- event log: each entry records the thread whose stream holds it
-- (thread_id, '' for the primary thread; ma.StreamThread) and whether the
-- session's own stream shows it (on_session; ma.OnSessionStream), both
-- computed when it is appended, so that a thread's stream is read through
-- an index and the session's without decoding events. Entries logged
-- before are all the primary thread's. The partial index leaves
-- single-agent sessions' writes as they were.
ALTER TABLE events ADD COLUMN thread_id TEXT NOT NULL DEFAULT '';
ALTER TABLE events ADD COLUMN on_session INTEGER NOT NULL DEFAULT 1;
CREATE INDEX events_thread ON events (session_id, thread_id, seq) WHERE thread_id <> '';

-- The child threads of sessions (the primary thread is derived from the
-- session, not stored), written only in their session's transaction;
-- body is the thread object (ma.SessionThread). A session's threads go
-- with it.
CREATE TABLE IF NOT EXISTS session_threads (
	pos        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	session_id TEXT NOT NULL,
	status     TEXT NOT NULL,
	archived   INTEGER NOT NULL DEFAULT 0,
	body       BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS session_threads_session ON session_threads (session_id, pos);
