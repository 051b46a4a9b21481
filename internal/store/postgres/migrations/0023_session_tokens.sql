-- The sessions tokens of pull workers (issue 32): one per hand-out of a
-- work item, stored by hash (hex SHA-256), deleted with their session;
-- environment_key_id is the key whose poll handed it out ('' for another
-- credential): its revocation ends the token.
CREATE TABLE IF NOT EXISTS session_tokens (
	hash               text PRIMARY KEY,
	session_id         text NOT NULL,
	work_id            text NOT NULL,
	environment_id     text NOT NULL,
	environment_key_id text NOT NULL DEFAULT '',
	created_at         bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS session_tokens_session ON session_tokens (session_id);
