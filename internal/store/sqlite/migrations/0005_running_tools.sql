-- Tool uses a runner started outside the log (built-in tools on an
-- executor) and has no result for yet: after a crash the next runner
-- answers them "may or may not have run" instead of running them again.
CREATE TABLE running_tools (
	session_id  TEXT NOT NULL,
	tool_use_id TEXT NOT NULL,
	PRIMARY KEY (session_id, tool_use_id)
) WITHOUT ROWID;
