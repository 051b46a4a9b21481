-- Idempotent (IF NOT EXISTS): the migration tests that rewind the schema
-- run it again.
-- Skills of the Skills API: the skill (body, the API object; name, the
-- slug every version's SKILL.md gives) and its versions (body; version,
-- the numeric version id). A version's content, a zip archive, is kept in
-- file_chunks under the key "<skill id>@<version>", like a file's.
CREATE TABLE IF NOT EXISTS skills (
	pos        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id         text NOT NULL UNIQUE,
	name       text NOT NULL,
	created_at bigint NOT NULL,
	body       bytea NOT NULL
);

CREATE TABLE IF NOT EXISTS skill_versions (
	skill_id   text NOT NULL,
	version    bigint NOT NULL,
	size_bytes bigint NOT NULL,
	sha256     text NOT NULL,
	body       bytea NOT NULL,
	PRIMARY KEY (skill_id, version)
);
