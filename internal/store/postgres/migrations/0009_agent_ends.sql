-- Machine tokens: long-lived credentials of a machine enrolled to host
-- sessions of some self-hosted environments (machine-scoped executors:
-- processes, agent ends). Only their hash is kept; environment_ids is a
-- JSON array of the environments the machine may serve.
CREATE TABLE machines (
	id              text PRIMARY KEY,
	name            text NOT NULL,
	environment_ids text NOT NULL,
	hash            text NOT NULL UNIQUE,
	hint            text NOT NULL,
	created_at      bigint NOT NULL,
	revoked_at      bigint
);
CREATE INDEX machines_created ON machines (created_at, id);
