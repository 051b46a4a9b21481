-- Memory stores (issue 32): a store's body is its API object; its
-- memories and their versions are rows of their own. A memory's content
-- is kept as bytes (PostgreSQL's text cannot hold NUL). Paths compare
-- bytewise (COLLATE "C"), the list order. A version names
-- its actor's ids in columns, for the list filters; created_by and
-- redacted_by are the actors' JSON. Versions outlive their memory and go
-- with their store.
CREATE TABLE IF NOT EXISTS memory_stores (
	pos          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id           text NOT NULL UNIQUE,
	workspace_id text NOT NULL DEFAULT 'wrkspc_default',
	created_at   bigint NOT NULL,
	archived     boolean NOT NULL DEFAULT false,
	body         bytea NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_stores_workspace ON memory_stores (workspace_id, pos);

CREATE TABLE IF NOT EXISTS memories (
	pos            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id             text NOT NULL UNIQUE,
	store_id       text NOT NULL,
	path           text COLLATE "C" NOT NULL,
	content        bytea NOT NULL,
	content_sha256 text NOT NULL,
	size           bigint NOT NULL,
	version_id     text NOT NULL,
	created_at     bigint NOT NULL,
	updated_at     bigint NOT NULL,
	UNIQUE (store_id, path)
);

CREATE TABLE IF NOT EXISTS memory_versions (
	pos                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	id                 text NOT NULL UNIQUE,
	store_id           text NOT NULL,
	memory_id          text NOT NULL,
	operation          text NOT NULL,
	content            bytea,
	content_sha256     text,
	size               bigint,
	path               text COLLATE "C",
	created_by         text,
	session_id         text NOT NULL DEFAULT '',
	api_key_id         text NOT NULL DEFAULT '',
	service_account_id text NOT NULL DEFAULT '',
	redacted_at        bigint,
	redacted_by        text,
	created_at         bigint NOT NULL
);
CREATE INDEX IF NOT EXISTS memory_versions_store ON memory_versions (store_id, pos);
CREATE INDEX IF NOT EXISTS memory_versions_memory ON memory_versions (memory_id, pos);

-- The memory stores attached to sessions (memory_store resources), for
-- GET /v1/sessions?memory_store_id=; written with the session, deleted
-- with it.
CREATE TABLE IF NOT EXISTS session_memory_stores (
	session_id text NOT NULL,
	store_id   text NOT NULL,
	PRIMARY KEY (session_id, store_id)
);
CREATE INDEX IF NOT EXISTS session_memory_stores_store ON session_memory_stores (store_id, session_id);
