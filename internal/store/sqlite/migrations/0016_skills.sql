-- Idempotent (IF NOT EXISTS): the migration tests that rewind the schema
-- run it again.
-- Skills of the Skills API: the skill (body, the API object; name, the
-- slug every version's SKILL.md gives) and its versions (body; version,
-- the numeric version id). A version's content, a zip archive, is kept in
-- file_chunks under the key "<skill id>@<version>", like a file's.
CREATE TABLE IF NOT EXISTS skills (
	pos        INTEGER PRIMARY KEY AUTOINCREMENT,
	id         TEXT NOT NULL UNIQUE,
	name       TEXT NOT NULL,
	created_at INTEGER NOT NULL,
	body       BLOB NOT NULL
);

CREATE TABLE IF NOT EXISTS skill_versions (
	skill_id   TEXT NOT NULL,
	version    INTEGER NOT NULL,
	size_bytes INTEGER NOT NULL,
	sha256     TEXT NOT NULL,
	body       BLOB NOT NULL,
	PRIMARY KEY (skill_id, version)
);
