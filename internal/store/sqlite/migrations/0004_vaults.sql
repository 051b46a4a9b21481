-- Vaults and their credentials. A credential's body is its API object (no
-- secrets); sealed is the AES-GCM blob of its secrets (package vault).
-- match_key is the mcp_server_url or the secret_name, unique among a vault's
-- live credentials.
CREATE TABLE vaults (
	pos        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	created_at INTEGER NOT NULL,
	archived   INTEGER NOT NULL DEFAULT 0,
	body       BLOB NOT NULL
);

CREATE TABLE vault_credentials (
	pos       INTEGER PRIMARY KEY AUTOINCREMENT,
	id        TEXT NOT NULL UNIQUE,
	vault_id  TEXT NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
	kind      TEXT NOT NULL,
	match_key TEXT NOT NULL,
	archived  INTEGER NOT NULL DEFAULT 0,
	body      BLOB NOT NULL,
	sealed    BLOB NOT NULL
);
CREATE INDEX vault_credentials_vault ON vault_credentials (vault_id, pos);
CREATE UNIQUE INDEX vault_credentials_live_key ON vault_credentials (vault_id, kind, match_key) WHERE archived = 0;
