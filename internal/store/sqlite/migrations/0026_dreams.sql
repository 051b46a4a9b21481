-- Dreams (issue 32): a dream's body is its API object (ma.Dream). The
-- columns are what lists filter on and what the server that runs it
-- keeps: whether it is active (not ended, or its session not yet
-- stopped), the memory store it updates in place (update_store_id, ''
-- for create_new; one active dream per store), the plan of its start
-- (JSON: the ids of the session and store it creates) and the claim of
-- the process that drives it (claim_until in Unix nanoseconds, by the
-- database's clock).
CREATE TABLE IF NOT EXISTS dreams (
	pos             INTEGER PRIMARY KEY AUTOINCREMENT,
	id              TEXT NOT NULL UNIQUE,
	workspace_id    TEXT NOT NULL DEFAULT 'wrkspc_default',
	created_at      INTEGER NOT NULL,
	status          TEXT NOT NULL,
	archived        INTEGER NOT NULL DEFAULT 0,
	active          INTEGER NOT NULL DEFAULT 1,
	update_store_id TEXT NOT NULL DEFAULT '',
	plan            TEXT NOT NULL DEFAULT '{}',
	claim_owner     TEXT NOT NULL DEFAULT '',
	claim_until     INTEGER NOT NULL DEFAULT 0,
	body            BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS dreams_workspace ON dreams (workspace_id, pos);
CREATE INDEX IF NOT EXISTS dreams_active ON dreams (active, pos);
CREATE INDEX IF NOT EXISTS dreams_update_store ON dreams (update_store_id, active);
