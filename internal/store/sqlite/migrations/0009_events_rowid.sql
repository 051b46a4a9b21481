-- Event bodies may be as large as a request (32 MiB). A WITHOUT ROWID
-- table keeps each row, body included, in its primary key's b-tree, and
-- SQLite reads a whole cell, overflow pages and all, into memory whenever a
-- search compares a key with it: every lookup near a large event read it
-- (140 ms and 30 MiB for a 30 MiB event), whatever the query selected. As a
-- rowid table, the key b-trees hold keys only, and a body is read only when
-- it is selected (length(body) reads none of it).
CREATE TABLE events_rowid (
	session_id   TEXT NOT NULL,
	seq          INTEGER NOT NULL,
	id           TEXT NOT NULL,
	type         TEXT NOT NULL,
	live         INTEGER NOT NULL,
	pending      INTEGER NOT NULL,
	processed_at INTEGER,
	body         BLOB NOT NULL,
	PRIMARY KEY (session_id, seq)
);
INSERT INTO events_rowid (session_id, seq, id, type, live, pending, processed_at, body)
	SELECT session_id, seq, id, type, live, pending, processed_at, body FROM events ORDER BY session_id, seq;
DROP TABLE events;
ALTER TABLE events_rowid RENAME TO events;
CREATE INDEX events_by_id ON events (session_id, id);
CREATE INDEX events_pending ON events (session_id, seq) WHERE pending;
