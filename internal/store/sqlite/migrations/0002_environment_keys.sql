-- Environment keys: long-lived credentials of a self-hosted environment's
-- executors and workers. Only their hash is kept.
CREATE TABLE environment_keys (
	id             TEXT PRIMARY KEY,
	environment_id TEXT NOT NULL,
	hash           TEXT NOT NULL UNIQUE,
	hint           TEXT NOT NULL,
	created_at     INTEGER NOT NULL,
	revoked_at     INTEGER
);
CREATE INDEX environment_keys_env ON environment_keys (environment_id, created_at);
