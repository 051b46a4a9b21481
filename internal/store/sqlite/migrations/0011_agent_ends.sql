-- Machine tokens: long-lived credentials of a machine enrolled to host
-- sessions of some self-hosted environments (machine-scoped executors:
-- processes, agent ends). Only their hash is kept; environment_ids is a
-- JSON array of the environments the machine may serve.
CREATE TABLE machines (
	id              TEXT PRIMARY KEY,
	name            TEXT NOT NULL,
	environment_ids TEXT NOT NULL,
	hash            TEXT NOT NULL UNIQUE,
	hint            TEXT NOT NULL,
	created_at      INTEGER NOT NULL,
	revoked_at      INTEGER
);
CREATE INDEX machines_created ON machines (created_at, id);
