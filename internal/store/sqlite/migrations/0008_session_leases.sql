-- Ownership leases of sessions: the process that runs a session holds its
-- lease until expires_at (Unix nanoseconds) and renews it; token grows at
-- each acquisition and fences off the writes of earlier owners. A released
-- lease keeps its row (owner '') so the token never goes back.
CREATE TABLE session_leases (
	session_id TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	token      INTEGER NOT NULL,
	expires_at INTEGER NOT NULL
) WITHOUT ROWID;
