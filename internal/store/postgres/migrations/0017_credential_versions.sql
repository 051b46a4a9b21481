-- A credential's version (its writes, counted) for compare-and-swap, and
-- until when a process holds the refresh of its OAuth token: replicas
-- refresh a rotating refresh token once between them. IF NOT EXISTS: the
-- migration tests replay the later migrations on a rewound schema.
ALTER TABLE vault_credentials
	ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0,
	ADD COLUMN IF NOT EXISTS refresh_until bigint NOT NULL DEFAULT 0;
