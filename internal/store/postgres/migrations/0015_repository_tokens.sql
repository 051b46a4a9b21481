-- The authorization tokens of sessions' github_repository resources,
-- sealed (AES-GCM, package vault) with the resource id as associated
-- data; never part of the session object. IF NOT EXISTS: the migration
-- tests replay the later migrations on a rewound schema.
CREATE TABLE IF NOT EXISTS repository_tokens (
	session_id  text NOT NULL,
	resource_id text NOT NULL,
	sealed      bytea NOT NULL,
	PRIMARY KEY (session_id, resource_id)
);
