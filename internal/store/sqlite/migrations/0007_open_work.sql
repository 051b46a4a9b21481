-- At most one open (not stopped) work item a session, enforced here rather
-- than by a check before the insert, which two concurrent enqueues both
-- passed. Sessions a race already gave two open items keep the newest; the
-- others are stopped.
UPDATE work_items
SET state = 'stopped', body = CAST(json_set(CAST(body AS TEXT), '$.State', 'stopped') AS BLOB)
WHERE state <> 'stopped'
  AND pos < (SELECT MAX(o.pos) FROM work_items o WHERE o.session_id = work_items.session_id AND o.state <> 'stopped');
CREATE UNIQUE INDEX work_open_session ON work_items (session_id) WHERE state <> 'stopped';
