-- The sessions tokens of pull workers (issue 32): one per hand-out of a
-- work item, stored by hash (hex SHA-256), deleted with their session;
-- environment_key_id is the key whose poll handed it out ('' for another
-- credential): its revocation ends the token.
CREATE TABLE IF NOT EXISTS session_tokens (
	hash               TEXT PRIMARY KEY,
	session_id         TEXT NOT NULL,
	work_id            TEXT NOT NULL,
	environment_id     TEXT NOT NULL,
	environment_key_id TEXT NOT NULL DEFAULT '',
	created_at         INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS session_tokens_session ON session_tokens (session_id);
