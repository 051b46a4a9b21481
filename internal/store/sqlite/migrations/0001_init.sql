-- The first schema of reins. Timestamps are Unix nanoseconds; bodies are the
-- objects' JSON as the API returns them.
CREATE TABLE api_keys (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	hash       TEXT NOT NULL UNIQUE,
	hint       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	revoked_at INTEGER
);

CREATE TABLE agents (
	pos        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	version    INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	archived   INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE agent_versions (
	pos      INTEGER PRIMARY KEY AUTOINCREMENT,
	agent_id TEXT NOT NULL,
	version  INTEGER NOT NULL,
	body     BLOB NOT NULL,
	UNIQUE (agent_id, version)
);

CREATE TABLE environments (
	pos        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	name       TEXT NOT NULL UNIQUE,
	created_at INTEGER NOT NULL,
	archived   INTEGER NOT NULL DEFAULT 0,
	body       BLOB NOT NULL
);

CREATE TABLE sessions (
	pos            INTEGER PRIMARY KEY AUTOINCREMENT,
	id             TEXT NOT NULL UNIQUE,
	status         TEXT NOT NULL,
	agent_id       TEXT NOT NULL,
	agent_version  INTEGER NOT NULL,
	environment_id TEXT NOT NULL,
	created_at     INTEGER NOT NULL,
	archived       INTEGER NOT NULL DEFAULT 0,
	last_seq       INTEGER NOT NULL DEFAULT 0,
	body           BLOB NOT NULL
);
CREATE INDEX sessions_status ON sessions (status);

-- The event log. live = 0 once a later echo of the same event id exists;
-- pending = 1 while a client event waits in the queue.
CREATE TABLE events (
	session_id   TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	id           TEXT NOT NULL,
	type         TEXT NOT NULL,
	live         INTEGER NOT NULL,
	pending      INTEGER NOT NULL,
	processed_at INTEGER,
	body         BLOB NOT NULL,
	PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE INDEX events_by_id ON events (session_id, id);
CREATE INDEX events_pending ON events (session_id, seq) WHERE pending = 1;
