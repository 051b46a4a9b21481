-- Ownership leases of sessions: the replica that runs a session holds its
-- lease until expires_at (Unix nanoseconds by the database's clock) and
-- renews it; token grows at each acquisition and fences off the writes of
-- earlier owners. A released lease keeps its row (owner '') so the token
-- never goes back.
CREATE TABLE session_leases (
	session_id text PRIMARY KEY,
	owner      text NOT NULL,
	token      bigint NOT NULL,
	expires_at bigint NOT NULL
);
