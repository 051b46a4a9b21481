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
	pos             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id              text NOT NULL UNIQUE,
	workspace_id    text NOT NULL DEFAULT 'wrkspc_default',
	url             text NOT NULL,
	name            text NOT NULL DEFAULT '',
	description     text NOT NULL DEFAULT '',
	enabled_events  text NOT NULL DEFAULT '[]',
	state           text NOT NULL DEFAULT 'enabled',
	disabled_reason text NOT NULL DEFAULT '',
	sealed          bytea NOT NULL,
	failures        bigint NOT NULL DEFAULT 0,
	created_at      bigint NOT NULL,
	updated_at      bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS webhook_endpoints_workspace ON webhook_endpoints (workspace_id, state);
CREATE TABLE IF NOT EXISTS webhook_deliveries (
	pos         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	endpoint_id text NOT NULL,
	event_id    text NOT NULL,
	event_type  text NOT NULL,
	body        bytea NOT NULL,
	attempts    bigint NOT NULL DEFAULT 0,
	due_at      bigint NOT NULL,
	UNIQUE (endpoint_id, event_id)
);
CREATE INDEX IF NOT EXISTS webhook_deliveries_due ON webhook_deliveries (due_at);
