package postgres

import "github.com/jackc/pgx/v5"

// MarkToolRunning implements store.Tx.
func (t *sessionTx) MarkToolRunning(toolUseID string) error {
	_, err := t.tx.Exec(t.ctx, `INSERT INTO running_tools (session_id, tool_use_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, t.sess.ID, toolUseID)
	return err
}

// UnmarkToolRunning implements store.Tx.
func (t *sessionTx) UnmarkToolRunning(toolUseID string) error {
	if toolUseID == "" {
		_, err := t.tx.Exec(t.ctx, `DELETE FROM running_tools WHERE session_id = $1`, t.sess.ID)
		return err
	}
	_, err := t.tx.Exec(t.ctx, `DELETE FROM running_tools WHERE session_id = $1 AND tool_use_id = $2`, t.sess.ID, toolUseID)
	return err
}

// ToolsRunning implements store.Tx.
func (t *sessionTx) ToolsRunning() ([]string, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT tool_use_id FROM running_tools WHERE session_id = $1 ORDER BY tool_use_id`, t.sess.ID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
