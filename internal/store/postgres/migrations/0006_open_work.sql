-- At most one open (not stopped) work item a session, enforced here rather
-- than by a check before the insert, which two concurrent enqueues both
-- passed. Sessions a race already gave two open items keep the newest; the
-- others are stopped.
UPDATE work_items w
SET state = 'stopped', body = convert_to(jsonb_set(convert_from(w.body, 'UTF8')::jsonb, '{State}', '"stopped"')::text, 'UTF8')
WHERE w.state <> 'stopped'
  AND w.pos < (SELECT MAX(o.pos) FROM work_items o WHERE o.session_id = w.session_id AND o.state <> 'stopped');
CREATE UNIQUE INDEX work_open_session ON work_items (session_id) WHERE state <> 'stopped';
