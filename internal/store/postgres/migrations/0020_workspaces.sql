-- Workspaces (issue 30). Every install has the workspace wrkspc_default, a
-- real row: what existed before workspaces lands in it, and so does what is
-- created without a workspace. Tags is a JSON object (text, kept as
-- written). The agents, environments, sessions, vaults, files, skills and
-- machines name their workspace; environment names are unique per
-- workspace. API keys gain a role, a workspace (developer and read-only
-- keys; '' for admins), a status (archived where revoked) and the key that
-- created them. audit_log is appended in the transaction of the change it
-- records. IF NOT EXISTS: the migration tests replay a migration on a
-- rewound schema.
CREATE TABLE IF NOT EXISTS workspaces (
	pos           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id            text NOT NULL UNIQUE,
	name          text NOT NULL,
	display_color text NOT NULL DEFAULT '',
	tags          text NOT NULL DEFAULT '{}',
	created_at    bigint NOT NULL,
	archived_at   bigint
);
INSERT INTO workspaces (id, name, created_at)
	VALUES ('wrkspc_default', 'Default', (extract(epoch FROM clock_timestamp()) * 1000000000)::bigint)
	ON CONFLICT (id) DO NOTHING;

ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS role text NOT NULL DEFAULT 'admin';
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS status text NOT NULL DEFAULT 'active';
ALTER TABLE api_keys ADD COLUMN IF NOT EXISTS created_by_key_id text NOT NULL DEFAULT '';
UPDATE api_keys SET status = 'archived' WHERE revoked_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS audit_log (
	pos          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id           text NOT NULL UNIQUE,
	at           bigint NOT NULL,
	actor_key_id text NOT NULL,
	actor        text NOT NULL,
	action       text NOT NULL,
	target_type  text NOT NULL,
	target_id    text NOT NULL,
	workspace_id text NOT NULL,
	details      text
);
CREATE INDEX IF NOT EXISTS audit_log_workspace ON audit_log (workspace_id, pos);
CREATE INDEX IF NOT EXISTS audit_log_action ON audit_log (action, pos);

ALTER TABLE agents ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE environments ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE vaults ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE files ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE skills ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE machines ADD COLUMN IF NOT EXISTS workspace_id text NOT NULL DEFAULT 'wrkspc_default';
CREATE INDEX IF NOT EXISTS agents_workspace ON agents (workspace_id, pos);
CREATE INDEX IF NOT EXISTS sessions_workspace ON sessions (workspace_id, pos);
CREATE INDEX IF NOT EXISTS vaults_workspace ON vaults (workspace_id, pos);
CREATE INDEX IF NOT EXISTS files_workspace ON files (workspace_id, pos);
CREATE INDEX IF NOT EXISTS skills_workspace ON skills (workspace_id, pos);
CREATE INDEX IF NOT EXISTS machines_workspace ON machines (workspace_id, created_at, id);

ALTER TABLE environments DROP CONSTRAINT IF EXISTS environments_name_key;
CREATE UNIQUE INDEX IF NOT EXISTS environments_workspace_name ON environments (workspace_id, name);
CREATE INDEX IF NOT EXISTS environments_workspace ON environments (workspace_id, pos);
