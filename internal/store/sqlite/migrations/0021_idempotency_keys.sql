-- The outcomes of API requests made with an Idempotency-Key (session
-- create, event send), per key they were authenticated with (scope):
-- each recorded in the transaction of the change its request made, so
-- that the request repeated with its key answers the first outcome and
-- changes nothing twice. response is the response body as sent; NULL for
-- a send, whose answer is its events as appended: the session's log
-- entries first_seq to last_seq. created_at (nanoseconds) ages a record
-- out (the API keeps them 24 hours). A session's records go with it. IF
-- NOT EXISTS: the migration tests replay the later migrations on a
-- rewound schema.
CREATE TABLE IF NOT EXISTS idempotency_keys (
	scope           TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	request_hash    TEXT NOT NULL,
	session_id      TEXT NOT NULL,
	status          INTEGER NOT NULL,
	response        TEXT,
	first_seq       INTEGER NOT NULL DEFAULT 0,
	last_seq        INTEGER NOT NULL DEFAULT 0,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (scope, idempotency_key)
);
CREATE INDEX IF NOT EXISTS idempotency_keys_created ON idempotency_keys (created_at);
CREATE INDEX IF NOT EXISTS idempotency_keys_session ON idempotency_keys (session_id);
