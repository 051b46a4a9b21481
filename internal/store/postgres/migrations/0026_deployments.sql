-- Deployments (issue 33): a deployment's body is its API object
-- (ma.Deployment); initial holds its initial events as each run's session
-- receives them, since when its schedule counts (Unix nanoseconds), and
-- scheduled whether a scheduler fires it (a schedule, active, not
-- archived). A run's body is its API object; scheduled_at (Unix
-- nanoseconds, NULL for a manual run) is unique per deployment, so that
-- of several replicas firing the same instant only one records it.
CREATE TABLE IF NOT EXISTS deployments (
	pos          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id           text NOT NULL UNIQUE,
	workspace_id text NOT NULL DEFAULT 'wrkspc_default',
	created_at   bigint NOT NULL,
	agent_id     text NOT NULL,
	status       text NOT NULL,
	archived     boolean NOT NULL DEFAULT false,
	scheduled    boolean NOT NULL DEFAULT false,
	initial      bytea NOT NULL,
	since        bigint NOT NULL DEFAULT 0,
	body         bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS deployments_workspace ON deployments (workspace_id, pos);
CREATE INDEX IF NOT EXISTS deployments_scheduled ON deployments (scheduled);

CREATE TABLE IF NOT EXISTS deployment_runs (
	pos           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id            text NOT NULL UNIQUE,
	workspace_id  text NOT NULL DEFAULT 'wrkspc_default',
	deployment_id text NOT NULL,
	created_at    bigint NOT NULL,
	trigger_type  text NOT NULL,
	scheduled_at  bigint,
	has_error     boolean NOT NULL DEFAULT false,
	body          bytea NOT NULL,
	UNIQUE (deployment_id, scheduled_at)
);
CREATE INDEX IF NOT EXISTS deployment_runs_workspace ON deployment_runs (workspace_id, pos);

ALTER TABLE sessions ADD COLUMN IF NOT EXISTS deployment_id text NOT NULL DEFAULT '';
CREATE INDEX IF NOT EXISTS sessions_deployment ON sessions (deployment_id, pos);
