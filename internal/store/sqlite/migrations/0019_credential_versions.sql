-- A credential's version (its writes, counted) for compare-and-swap, and
-- until when a process holds the refresh of its OAuth token: replicas
-- refresh a rotating refresh token once between them.
ALTER TABLE vault_credentials ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
ALTER TABLE vault_credentials ADD COLUMN refresh_until INTEGER NOT NULL DEFAULT 0;
