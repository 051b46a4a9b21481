-- Environment keys: long-lived credentials of a self-hosted environment's
-- executors and workers. Only their hash is kept.
CREATE TABLE environment_keys (
	id             text PRIMARY KEY,
	environment_id text NOT NULL,
	hash           text NOT NULL UNIQUE,
	hint           text NOT NULL,
	created_at     bigint NOT NULL,
	revoked_at     bigint
);
CREATE INDEX environment_keys_env ON environment_keys (environment_id, created_at);
