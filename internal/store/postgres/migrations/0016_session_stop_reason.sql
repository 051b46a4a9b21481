-- The stop reason of an idle session's last turn, on the session (a reins
-- extension, stop_reason in the session object) and in a column the
-- session list filters on (stop_reasons[]). Sessions idle before this
-- migration take it from their last session.status_idle, found by
-- walking the session's log back from its end. The session body is
-- spliced as text, not cast to jsonb: jsonb refuses a \u0000 a title may
-- hold. IF NOT EXISTS and "stop_reason IS NULL": the migration tests
-- replay the later migrations on a rewound schema.
ALTER TABLE sessions ADD COLUMN IF NOT EXISTS stop_reason text;
WITH last_idle AS (
	SELECT s.id, (SELECT convert_from(e.body, 'UTF8')::jsonb -> 'stop_reason' FROM events e
		WHERE e.session_id = s.id AND e.type = 'session.status_idle' ORDER BY e.seq DESC LIMIT 1) AS sr
	FROM sessions s WHERE s.status = 'idle' AND s.stop_reason IS NULL
)
UPDATE sessions s SET stop_reason = l.sr ->> 'type',
	body = convert_to('{"stop_reason":' || l.sr::text || ',' || substr(convert_from(s.body, 'UTF8'), 2), 'UTF8')
	FROM last_idle l WHERE s.id = l.id AND jsonb_typeof(l.sr) = 'object';
