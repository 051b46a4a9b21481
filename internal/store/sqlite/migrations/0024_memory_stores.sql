-- Memory stores (issue 32): a store's body is its API object; its
-- memories and their versions are rows of their own. A memory's content
-- is kept as bytes (PostgreSQL's text cannot hold NUL). Paths compare
-- bytewise (SQLite's BINARY collation), the list order. A version names
-- its actor's ids in columns, for the list filters; created_by and
-- redacted_by are the actors' JSON. Versions outlive their memory and go
-- with their store.
CREATE TABLE IF NOT EXISTS memory_stores (
	pos          INTEGER PRIMARY KEY AUTOINCREMENT,
	id           TEXT NOT NULL UNIQUE,
	workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default',
	created_at   INTEGER NOT NULL,
	archived     INTEGER NOT NULL DEFAULT 0,
	body         BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_stores_workspace ON memory_stores (workspace_id, pos);

CREATE TABLE IF NOT EXISTS memories (
	pos            INTEGER PRIMARY KEY AUTOINCREMENT,
	id             TEXT NOT NULL UNIQUE,
	store_id       TEXT NOT NULL,
	path           TEXT NOT NULL,
	content        BLOB NOT NULL,
	content_sha256 TEXT NOT NULL,
	size           INTEGER NOT NULL,
	version_id     TEXT NOT NULL,
	created_at     INTEGER NOT NULL,
	updated_at     INTEGER NOT NULL,
	UNIQUE (store_id, path)
);

CREATE TABLE IF NOT EXISTS memory_versions (
	pos                INTEGER PRIMARY KEY AUTOINCREMENT,
	id                 TEXT NOT NULL UNIQUE,
	store_id           TEXT NOT NULL,
	memory_id          TEXT NOT NULL,
	operation          TEXT NOT NULL,
	content            BLOB,
	content_sha256     TEXT,
	size               INTEGER,
	path               TEXT,
	created_by         TEXT,
	session_id         TEXT NOT NULL DEFAULT '',
	api_key_id         TEXT NOT NULL DEFAULT '',
	service_account_id TEXT NOT NULL DEFAULT '',
	redacted_at        INTEGER,
	redacted_by        TEXT,
	created_at         INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_versions_store ON memory_versions (store_id, pos);
CREATE INDEX IF NOT EXISTS memory_versions_memory ON memory_versions (memory_id, pos);

-- The memory stores attached to sessions (memory_store resources), for
-- GET /v1/sessions?memory_store_id=; written with the session, deleted
-- with it.
CREATE TABLE IF NOT EXISTS session_memory_stores (
	session_id TEXT NOT NULL,
	store_id   TEXT NOT NULL,
	PRIMARY KEY (session_id, store_id)
);
CREATE INDEX IF NOT EXISTS session_memory_stores_store ON session_memory_stores (store_id, session_id);
