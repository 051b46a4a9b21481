-- Platform tool calls by idempotency key: the first call with a key runs
-- the tool; a call with the same key and body answers its outcome (the
-- endpoint's JSON response, NULL while the call runs), never running the
-- tool twice. tool_use_id is the agent.tool_use the call recorded. IF NOT
-- EXISTS: the migration tests replay the later migrations on a rewound
-- schema.
CREATE TABLE IF NOT EXISTS tool_calls (
	session_id      text NOT NULL,
	idempotency_key text NOT NULL,
	request_hash    text NOT NULL,
	tool_use_id     text NOT NULL DEFAULT '',
	outcome         text,
	created_at      bigint NOT NULL,
	PRIMARY KEY (session_id, idempotency_key)
);
