-- Replicas announce the self-hosted environments they have executors of,
-- until expires_at (Unix nanoseconds), renewed while they do: a session
-- that needs those executors moves to them. (One process uses a SQLite
-- file; the table keeps the store's statements the same on both drivers.)
CREATE TABLE replica_hands (
	environment_id TEXT NOT NULL,
	replica        TEXT NOT NULL,
	expires_at     INTEGER NOT NULL,
	PRIMARY KEY (environment_id, replica)
) WITHOUT ROWID;
CREATE INDEX replica_hands_replica ON replica_hands (replica);

-- The marker of the workspace a cloud session last used: a process that
-- finds another one beside the session's workspace (or none) knows the
-- workspace it has is not that one, and tells the model it was reset.
CREATE TABLE session_workspaces (
	session_id TEXT PRIMARY KEY,
	marker     TEXT NOT NULL
) WITHOUT ROWID;
