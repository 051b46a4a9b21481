-- Workspaces (issue 30). Every install has the workspace wrkspc_default, a
-- real row: what existed before workspaces lands in it, and so does what is
-- created without a workspace. Tags is a JSON object. The agents,
-- environments, sessions, vaults, files, skills and machines name their
-- workspace; API keys gain a role, a workspace (developer and read-only
-- keys; '' for admins), a status (archived where revoked) and the key that
-- created them. audit_log is appended in the transaction of the change it
-- records. IF NOT EXISTS and OR IGNORE: the migration tests replay the
-- later migrations on a rewound schema.
CREATE TABLE IF NOT EXISTS workspaces (
	pos           INTEGER PRIMARY KEY AUTOINCREMENT,
	id            TEXT NOT NULL UNIQUE,
	name          TEXT NOT NULL,
	display_color TEXT NOT NULL DEFAULT '',
	tags          TEXT NOT NULL DEFAULT '{}',
	created_at    INTEGER NOT NULL,
	archived_at   INTEGER
);
INSERT OR IGNORE INTO workspaces (id, name, created_at)
	VALUES ('wrkspc_default', 'Default', CAST((julianday('now') - 2440587.5) * 86400000000000 AS INTEGER));

ALTER TABLE api_keys ADD COLUMN role TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE api_keys ADD COLUMN workspace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE api_keys ADD COLUMN status TEXT NOT NULL DEFAULT 'active';
ALTER TABLE api_keys ADD COLUMN created_by_key_id TEXT NOT NULL DEFAULT '';
UPDATE api_keys SET status = 'archived' WHERE revoked_at IS NOT NULL;

CREATE TABLE IF NOT EXISTS audit_log (
	pos          INTEGER PRIMARY KEY AUTOINCREMENT,
	id           TEXT NOT NULL UNIQUE,
	at           INTEGER NOT NULL,
	actor_key_id TEXT NOT NULL,
	actor        TEXT NOT NULL,
	action       TEXT NOT NULL,
	target_type  TEXT NOT NULL,
	target_id    TEXT NOT NULL,
	workspace_id TEXT NOT NULL,
	details      TEXT
);
CREATE INDEX IF NOT EXISTS audit_log_workspace ON audit_log (workspace_id, pos);
CREATE INDEX IF NOT EXISTS audit_log_action ON audit_log (action, pos);

ALTER TABLE agents ADD COLUMN workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE sessions ADD COLUMN workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE vaults ADD COLUMN workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE files ADD COLUMN workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE skills ADD COLUMN workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default';
ALTER TABLE machines ADD COLUMN workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default';
CREATE INDEX agents_workspace ON agents (workspace_id, pos);
CREATE INDEX sessions_workspace ON sessions (workspace_id, pos);
CREATE INDEX vaults_workspace ON vaults (workspace_id, pos);
CREATE INDEX files_workspace ON files (workspace_id, pos);
CREATE INDEX skills_workspace ON skills (workspace_id, pos);
CREATE INDEX machines_workspace ON machines (workspace_id, created_at, id);

-- Environment names become unique per workspace: the table is rebuilt
-- (SQLite cannot drop the column's UNIQUE), keeping pos, the list order.
CREATE TABLE environments_ws (
	pos          INTEGER PRIMARY KEY AUTOINCREMENT,
	id           TEXT NOT NULL UNIQUE,
	workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default',
	name         TEXT NOT NULL,
	created_at   INTEGER NOT NULL,
	archived     INTEGER NOT NULL DEFAULT 0,
	body         BLOB NOT NULL,
	UNIQUE (workspace_id, name)
);
INSERT INTO environments_ws (pos, id, name, created_at, archived, body)
	SELECT pos, id, name, created_at, archived, body FROM environments ORDER BY pos;
DROP TABLE environments;
ALTER TABLE environments_ws RENAME TO environments;
CREATE INDEX environments_workspace ON environments (workspace_id, pos);
