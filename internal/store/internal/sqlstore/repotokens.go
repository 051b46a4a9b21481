package sqlstore

import "context"

// SetRepositoryToken implements store.RepositoryTokens.
func (s *Store) SetRepositoryToken(ctx context.Context, sessionID, resourceID string, sealed []byte) error {
	if sealed == nil {
		_, err := s.exec(ctx, `DELETE FROM repository_tokens WHERE session_id = ? AND resource_id = ?`, sessionID, resourceID)
		return err
	}
	_, err := s.exec(ctx, `INSERT INTO repository_tokens (session_id, resource_id, sealed) VALUES (?, ?, ?)
		ON CONFLICT (session_id, resource_id) DO UPDATE SET sealed = excluded.sealed`, sessionID, resourceID, sealed)
	return err
}

// RepositoryTokens implements store.RepositoryTokens.
func (s *Store) RepositoryTokens(ctx context.Context, sessionID string) (map[string][]byte, error) {
	type row struct {
		id     string
		sealed []byte
	}
	rows, err := collect(ctx, s.r, func(r Row) (row, error) {
		var v row
		err := r.Scan(&v.id, &v.sealed)
		return v, err
	}, `SELECT resource_id, sealed FROM repository_tokens WHERE session_id = ?`, sessionID)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]byte, len(rows))
	for _, r := range rows {
		out[r.id] = r.sealed
	}
	return out, nil
}
