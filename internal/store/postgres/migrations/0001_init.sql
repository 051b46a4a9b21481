-- The first schema of reins on PostgreSQL. Timestamps are Unix nanoseconds;
-- bodies are the objects' JSON exactly as the API returns them (bytea, not
-- jsonb, which would reorder keys). pos columns give the list order.
CREATE TABLE api_keys (
	id         text PRIMARY KEY,
	name       text NOT NULL,
	hash       text NOT NULL UNIQUE,
	hint       text NOT NULL,
	created_at bigint NOT NULL,
	revoked_at bigint
);

CREATE TABLE agents (
	pos        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text NOT NULL UNIQUE,
	version    bigint NOT NULL,
	created_at bigint NOT NULL,
	archived   boolean NOT NULL DEFAULT false
);

CREATE TABLE agent_versions (
	pos      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	agent_id text NOT NULL,
	version  bigint NOT NULL,
	body     bytea NOT NULL,
	UNIQUE (agent_id, version)
);

CREATE TABLE environments (
	pos        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text NOT NULL UNIQUE,
	name       text NOT NULL UNIQUE,
	created_at bigint NOT NULL,
	archived   boolean NOT NULL DEFAULT false,
	body       bytea NOT NULL
);

CREATE TABLE sessions (
	pos            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id             text NOT NULL UNIQUE,
	status         text NOT NULL,
	agent_id       text NOT NULL,
	agent_version  bigint NOT NULL,
	environment_id text NOT NULL,
	created_at     bigint NOT NULL,
	archived       boolean NOT NULL DEFAULT false,
	last_seq       bigint NOT NULL DEFAULT 0,
	body           bytea NOT NULL
);
CREATE INDEX sessions_status ON sessions (status);

-- The event log. live is false once a later echo of the same event id
-- exists; pending is true while a client event waits in the queue.
CREATE TABLE events (
	session_id   text NOT NULL,
	seq          bigint NOT NULL,
	id           text NOT NULL,
	type         text NOT NULL,
	live         boolean NOT NULL,
	pending      boolean NOT NULL,
	processed_at bigint,
	body         bytea NOT NULL,
	PRIMARY KEY (session_id, seq)
);
CREATE INDEX events_by_id ON events (session_id, id);
CREATE INDEX events_pending ON events (session_id, seq) WHERE pending;
