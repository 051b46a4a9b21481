-- The stop reason of an idle session's last turn, on the session (a reins
-- extension, stop_reason in the session object) and in a column the
-- session list filters on (stop_reasons[]). Sessions idle before this
-- migration take it from their last session.status_idle, found by
-- walking the session's log back from its end.
ALTER TABLE sessions ADD COLUMN stop_reason TEXT;
UPDATE sessions SET body = json_set(CAST(body AS TEXT), '$.stop_reason', json(
	(SELECT CAST(e.body AS TEXT) -> '$.stop_reason' FROM events e
		WHERE e.session_id = sessions.id AND e.type = 'session.status_idle' ORDER BY e.seq DESC LIMIT 1)))
	WHERE status = 'idle' AND EXISTS (SELECT 1 FROM events e WHERE e.session_id = sessions.id AND e.type = 'session.status_idle');
UPDATE sessions SET stop_reason = CAST(body AS TEXT) ->> '$.stop_reason.type' WHERE status = 'idle';
