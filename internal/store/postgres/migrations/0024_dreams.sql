-- Dreams (issue 32): a dream's body is its API object (ma.Dream). The
-- columns are what lists filter on and what the server that runs it
-- keeps: whether it is active (not ended, or its session not yet
-- stopped), the memory store it updates in place (update_store_id, ''
-- for create_new; one active dream per store), the plan of its start
-- (JSON: the ids of the session and store it creates) and the claim of
-- the process that drives it (claim_until in Unix nanoseconds, by the
-- database's clock).
CREATE TABLE IF NOT EXISTS dreams (
	pos             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id              text NOT NULL UNIQUE,
	workspace_id    text NOT NULL DEFAULT 'wrkspc_default',
	created_at      bigint NOT NULL,
	status          text NOT NULL,
	archived        boolean NOT NULL DEFAULT false,
	active          boolean NOT NULL DEFAULT true,
	update_store_id text NOT NULL DEFAULT '',
	plan            text NOT NULL DEFAULT '{}',
	claim_owner     text NOT NULL DEFAULT '',
	claim_until     bigint NOT NULL DEFAULT 0,
	body            bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS dreams_workspace ON dreams (workspace_id, pos);
CREATE INDEX IF NOT EXISTS dreams_active ON dreams (active, pos);
CREATE INDEX IF NOT EXISTS dreams_update_store ON dreams (update_store_id, active);
