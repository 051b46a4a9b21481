-- Webhooks (issue 33). webhook_endpoints are the receivers of a
-- workspace's events: enabled_events is a JSON array of event types,
-- sealed the signing secret sealed under the master key (its associated
-- data the endpoint's id), failures the deliveries dropped in a row
-- since the last 2xx. webhook_deliveries is the outbox: one row per
-- event and subscribed endpoint, written in the transaction of the
-- change it reports and deleted once acknowledged or dropped; due_at
-- (Unix nanoseconds, by the database's clock) is when it may next be
-- attempted, pushed past the attempt's lease when claimed.
CREATE TABLE IF NOT EXISTS webhook_endpoints (
	pos             INTEGER PRIMARY KEY AUTOINCREMENT,
	id              TEXT NOT NULL UNIQUE,
	workspace_id    TEXT NOT NULL DEFAULT 'wrkspc_default',
	url             TEXT NOT NULL,
	name            TEXT NOT NULL DEFAULT '',
	description     TEXT NOT NULL DEFAULT '',
	enabled_events  TEXT NOT NULL DEFAULT '[]',
	state           TEXT NOT NULL DEFAULT 'enabled',
	disabled_reason TEXT NOT NULL DEFAULT '',
	sealed          BLOB NOT NULL,
	failures        INTEGER NOT NULL DEFAULT 0,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_endpoints_workspace ON webhook_endpoints (workspace_id, state);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
	pos         INTEGER PRIMARY KEY AUTOINCREMENT,
	endpoint_id TEXT NOT NULL,
	event_id    TEXT NOT NULL,
	event_type  TEXT NOT NULL,
	body        BLOB NOT NULL,
	attempts    INTEGER NOT NULL DEFAULT 0,
	due_at      INTEGER NOT NULL,
	UNIQUE (endpoint_id, event_id)
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (due_at);
