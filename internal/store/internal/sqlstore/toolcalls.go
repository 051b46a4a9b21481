package sqlstore

import (
	"context"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// BeginToolCall implements store.ToolCalls.
func (s *Store) BeginToolCall(ctx context.Context, c store.ToolCall) (store.ToolCall, bool, error) {
	n, err := s.exec(ctx, `INSERT INTO tool_calls (session_id, idempotency_key, request_hash, tool_use_id, created_at) VALUES (?, ?, ?, '', ?)
		ON CONFLICT (session_id, idempotency_key) DO NOTHING`, c.SessionID, c.Key, c.RequestHash, c.CreatedAt.UnixNano())
	if err != nil {
		return store.ToolCall{}, false, err
	}
	got := store.ToolCall{SessionID: c.SessionID, Key: c.Key}
	var outcome *string
	var created int64
	err = s.r.QueryRow(ctx, `SELECT request_hash, tool_use_id, outcome, created_at FROM tool_calls WHERE session_id = ? AND idempotency_key = ?`,
		c.SessionID, c.Key).Scan(&got.RequestHash, &got.ToolUseID, &outcome, &created)
	if err != nil {
		return store.ToolCall{}, false, err
	}
	if outcome != nil {
		got.Outcome = []byte(*outcome)
	}
	got.CreatedAt = time.Unix(0, created).UTC()
	return got, n == 1, nil
}

// SetToolCallUse implements store.ToolCalls.
func (s *Store) SetToolCallUse(ctx context.Context, sessionID, key, toolUseID string) error {
	_, err := s.exec(ctx, `UPDATE tool_calls SET tool_use_id = ? WHERE session_id = ? AND idempotency_key = ?`, toolUseID, sessionID, key)
	return err
}

// FinishToolCall implements store.ToolCalls.
func (s *Store) FinishToolCall(ctx context.Context, sessionID, key string, outcome []byte) error {
	_, err := s.exec(ctx, `UPDATE tool_calls SET outcome = ? WHERE session_id = ? AND idempotency_key = ?`, string(outcome), sessionID, key)
	return err
}

// DeleteToolCall implements store.ToolCalls.
func (s *Store) DeleteToolCall(ctx context.Context, sessionID, key string) error {
	_, err := s.exec(ctx, `DELETE FROM tool_calls WHERE session_id = ? AND idempotency_key = ?`, sessionID, key)
	return err
}
