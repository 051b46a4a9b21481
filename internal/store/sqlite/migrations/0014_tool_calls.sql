-- Platform tool calls by idempotency key: the first call with a key runs
-- the tool; a call with the same key and body answers its outcome (the
-- endpoint's JSON response, NULL while the call runs), never running the
-- tool twice. tool_use_id is the agent.tool_use the call recorded. IF NOT
-- EXISTS: the migration tests replay the later migrations on a rewound
-- schema.
CREATE TABLE IF NOT EXISTS tool_calls (
	session_id      TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	request_hash    TEXT NOT NULL,
	tool_use_id     TEXT NOT NULL DEFAULT '',
	outcome         TEXT,
	created_at      INTEGER NOT NULL,
	PRIMARY KEY (session_id, idempotency_key)
);
