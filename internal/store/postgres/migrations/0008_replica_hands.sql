-- Replicas announce the self-hosted environments they have executors of,
-- until expires_at (Unix nanoseconds by the database's clock), renewed
-- while they do: a session that needs those executors moves to them.
CREATE TABLE replica_hands (
	environment_id text NOT NULL,
	replica        text NOT NULL,
	expires_at     bigint NOT NULL,
	PRIMARY KEY (environment_id, replica)
);
CREATE INDEX replica_hands_replica ON replica_hands (replica);

-- The marker of the workspace a cloud session last used: a replica that
-- finds another one beside the session's workspace (or none) knows the
-- workspace it has is not that one, and tells the model it was reset.
CREATE TABLE session_workspaces (
	session_id text PRIMARY KEY,
	marker     text NOT NULL
);
