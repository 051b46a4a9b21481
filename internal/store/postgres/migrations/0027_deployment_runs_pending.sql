-- A deployment run is pending from its insert until it records its
-- session or its error. The scheduler marks a pending run whose server
-- stopped before its session was created as failed; the index finds them.
-- Runs recorded before this migration count as finished.
ALTER TABLE deployment_runs ADD COLUMN IF NOT EXISTS pending boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS deployment_runs_pending ON deployment_runs (created_at) WHERE pending;
