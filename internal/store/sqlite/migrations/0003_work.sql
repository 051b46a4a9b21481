-- The work queues of self-hosted environments.
CREATE TABLE work_items (
	pos              INTEGER PRIMARY KEY AUTOINCREMENT,
	id               TEXT NOT NULL UNIQUE,
	environment_id   TEXT NOT NULL,
	session_id       TEXT NOT NULL,
	state            TEXT NOT NULL,
	created_at       INTEGER NOT NULL,
	claimed_at       INTEGER,
	acknowledged     INTEGER NOT NULL DEFAULT 0,
	lease_expires_at INTEGER,
	body             BLOB NOT NULL
);
CREATE INDEX work_queue ON work_items (environment_id, state, pos);
CREATE INDEX work_session ON work_items (session_id, pos);
CREATE INDEX work_lease ON work_items (state, lease_expires_at);
