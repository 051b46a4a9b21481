package postgres

import (
	"encoding/json"

	"github.com/reinsdev/reins/store"
)

// ReadLog implements store.Tx.
func (t *sessionTx) ReadLog(after int64) ([]store.Entry, error) {
	rows, err := t.tx.Query(t.ctx, `SELECT seq, body FROM events WHERE session_id = $1 AND seq > $2 ORDER BY seq`, t.sess.ID, after)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Entry
	for rows.Next() {
		var e store.Entry
		if err := rows.Scan(&e.Seq, &e.Raw); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(e.Raw, &e.Event); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
