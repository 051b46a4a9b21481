-- Idempotent (IF NOT EXISTS): the migration tests that rewind the schema
-- run it again.
-- Files of the Files API: metadata (body, the API object) and content in
-- pieces of at most 1 MiB (store.FileChunk), so that reads stream.
CREATE TABLE IF NOT EXISTS files (
	pos        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	scope_id   TEXT NOT NULL DEFAULT '',
	created_at INTEGER NOT NULL,
	sha256     TEXT NOT NULL,
	body       BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS files_scope ON files (scope_id, pos);

CREATE TABLE IF NOT EXISTS file_chunks (
	file_id TEXT NOT NULL,
	n       INTEGER NOT NULL,
	data    BLOB NOT NULL,
	PRIMARY KEY (file_id, n)
);
