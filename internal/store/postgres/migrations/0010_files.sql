-- Idempotent (IF NOT EXISTS): the migration tests that rewind the schema
-- run it again.
-- Files of the Files API: metadata (body, the API object) and content in
-- pieces of at most 1 MiB (store.FileChunk), so that reads stream.
CREATE TABLE IF NOT EXISTS files (
	pos        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text NOT NULL UNIQUE,
	scope_id   text NOT NULL DEFAULT '',
	created_at bigint NOT NULL,
	sha256     text NOT NULL,
	body       bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS files_scope ON files (scope_id, pos);

CREATE TABLE IF NOT EXISTS file_chunks (
	file_id text NOT NULL,
	n       integer NOT NULL,
	data    bytea NOT NULL,
	PRIMARY KEY (file_id, n)
);
