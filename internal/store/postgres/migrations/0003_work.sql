-- The work queues of self-hosted environments.
CREATE TABLE work_items (
	pos              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id               text NOT NULL UNIQUE,
	environment_id   text NOT NULL,
	session_id       text NOT NULL,
	state            text NOT NULL,
	created_at       bigint NOT NULL,
	claimed_at       bigint,
	acknowledged     boolean NOT NULL DEFAULT false,
	lease_expires_at bigint,
	body             bytea NOT NULL
);
CREATE INDEX work_queue ON work_items (environment_id, state, pos);
CREATE INDEX work_session ON work_items (session_id, pos);
CREATE INDEX work_lease ON work_items (state, lease_expires_at);
