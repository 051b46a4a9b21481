-- Vaults and their credentials. A credential's body is its API object (no
-- secrets); sealed is the AES-GCM blob of its secrets (package vault).
-- match_key is the mcp_server_url or the secret_name, unique among a vault's
-- live credentials.
CREATE TABLE vaults (
	pos        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text NOT NULL UNIQUE,
	created_at bigint NOT NULL,
	archived   boolean NOT NULL DEFAULT false,
	body       bytea NOT NULL
);

CREATE TABLE vault_credentials (
	pos       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id        text NOT NULL UNIQUE,
	vault_id  text NOT NULL REFERENCES vaults (id) ON DELETE CASCADE,
	kind      text NOT NULL,
	match_key text NOT NULL,
	archived  boolean NOT NULL DEFAULT false,
	body      bytea NOT NULL,
	sealed    bytea NOT NULL
);
CREATE INDEX vault_credentials_vault ON vault_credentials (vault_id, pos);
CREATE UNIQUE INDEX vault_credentials_live_key ON vault_credentials (vault_id, kind, match_key) WHERE NOT archived;
