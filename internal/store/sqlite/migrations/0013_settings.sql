-- Settings every process sharing the database must agree on, recorded by
-- the first process to start: the id of the master key vault secrets are
-- sealed under (not the key, which never leaves the processes). IF NOT
-- EXISTS: the migration tests replay the later migrations on a rewound
-- schema.
CREATE TABLE IF NOT EXISTS settings (
	name  text PRIMARY KEY,
	value text NOT NULL
);
