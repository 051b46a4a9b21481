-- Deployments (issue 33): a deployment's body is its API object
-- (ma.Deployment); initial holds its initial events as each run's session
-- receives them, since when its schedule counts (Unix nanoseconds), and
-- scheduled whether a scheduler fires it (a schedule, active, not
-- archived). A run's body is its API object; scheduled_at (Unix
-- nanoseconds, NULL for a manual run) is unique per deployment, so that
-- of several replicas firing the same instant only one records it.
CREATE TABLE IF NOT EXISTS deployments (
	pos          INTEGER PRIMARY KEY AUTOINCREMENT,
	id           TEXT NOT NULL UNIQUE,
	workspace_id TEXT NOT NULL DEFAULT 'wrkspc_default',
	created_at   INTEGER NOT NULL,
	agent_id     TEXT NOT NULL,
	status       TEXT NOT NULL,
	archived     INTEGER NOT NULL DEFAULT 0,
	scheduled    INTEGER NOT NULL DEFAULT 0,
	initial      BLOB NOT NULL,
	since        INTEGER NOT NULL DEFAULT 0,
	body         BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS deployments_workspace ON deployments (workspace_id, pos);
CREATE INDEX IF NOT EXISTS deployments_scheduled ON deployments (scheduled);

CREATE TABLE IF NOT EXISTS deployment_runs (
	pos           INTEGER PRIMARY KEY AUTOINCREMENT,
	id            TEXT NOT NULL UNIQUE,
	workspace_id  TEXT NOT NULL DEFAULT 'wrkspc_default',
	deployment_id TEXT NOT NULL,
	created_at    INTEGER NOT NULL,
	trigger_type  TEXT NOT NULL,
	scheduled_at  INTEGER,
	has_error     INTEGER NOT NULL DEFAULT 0,
	body          BLOB NOT NULL,
	UNIQUE (deployment_id, scheduled_at)
);
CREATE INDEX IF NOT EXISTS deployment_runs_workspace ON deployment_runs (workspace_id, pos);

ALTER TABLE sessions ADD COLUMN deployment_id TEXT NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS sessions_deployment ON sessions (deployment_id, pos);
