package sqlite

// MarkToolRunning implements store.Tx.
func (t *sessionTx) MarkToolRunning(toolUseID string) error {
	_, err := t.tx.ExecContext(t.ctx, `INSERT OR IGNORE INTO running_tools (session_id, tool_use_id) VALUES (?, ?)`, t.sess.ID, toolUseID)
	return err
}

// UnmarkToolRunning implements store.Tx.
func (t *sessionTx) UnmarkToolRunning(toolUseID string) error {
	if toolUseID == "" {
		_, err := t.tx.ExecContext(t.ctx, `DELETE FROM running_tools WHERE session_id = ?`, t.sess.ID)
		return err
	}
	_, err := t.tx.ExecContext(t.ctx, `DELETE FROM running_tools WHERE session_id = ? AND tool_use_id = ?`, t.sess.ID, toolUseID)
	return err
}

// ToolsRunning implements store.Tx.
func (t *sessionTx) ToolsRunning() ([]string, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT tool_use_id FROM running_tools WHERE session_id = ? ORDER BY tool_use_id`, t.sess.ID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
