package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// CreateMachine implements store.Machines.
func (s *Store) CreateMachine(ctx context.Context, m store.Machine) error {
	envs, err := json.Marshal(m.EnvironmentIDs)
	if err != nil {
		return err
	}
	_, err = s.exec(ctx, `INSERT INTO machines (id, name, environment_ids, hash, hint, created_at, workspace_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.Name, string(envs), m.Hash, m.Hint, m.CreatedAt.UnixNano(), workspaceOf(ctx))
	return s.conflict(err, "machine")
}

const machineCols = `id, name, environment_ids, hash, hint, created_at, revoked_at, workspace_id`

func scanMachine(row Row) (store.Machine, error) {
	var m store.Machine
	var envs string
	var created int64
	var revoked *int64
	if err := row.Scan(&m.ID, &m.Name, &envs, &m.Hash, &m.Hint, &created, &revoked, &m.WorkspaceID); err != nil {
		return m, err
	}
	if err := json.Unmarshal([]byte(envs), &m.EnvironmentIDs); err != nil {
		return m, fmt.Errorf("machine %s: environment_ids: %w", m.ID, err)
	}
	m.CreatedAt = time.Unix(0, created).UTC()
	m.RevokedAt = timePtr(revoked)
	return m, nil
}

// MachineByHash implements store.Machines.
func (s *Store) MachineByHash(ctx context.Context, hash string) (store.Machine, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	m, err := scanMachine(s.r.QueryRow(ctx, `SELECT `+machineCols+` FROM machines WHERE hash = ?`+cond, append([]any{hash}, args...)...))
	return m, notFound(err, "machine", "(by token hash)")
}

// GetMachine implements store.Machines.
func (s *Store) GetMachine(ctx context.Context, id string) (store.Machine, error) {
	cond, args := inWorkspace(ctx, "workspace_id")
	m, err := scanMachine(s.r.QueryRow(ctx, `SELECT `+machineCols+` FROM machines WHERE id = ?`+cond, append([]any{id}, args...)...))
	return m, notFound(err, "machine", id)
}

// ListMachines implements store.Machines.
func (s *Store) ListMachines(ctx context.Context) ([]store.Machine, error) {
	var q query
	q.scope(ctx, "workspace_id")
	return collect(ctx, s.r, scanMachine, `SELECT `+machineCols+` FROM machines`+q.clause()+` ORDER BY created_at, id`, q.args...)
}

// RevokeMachine implements store.Machines.
func (s *Store) RevokeMachine(ctx context.Context, id string, at time.Time) (store.Machine, error) {
	var m store.Machine
	err := s.d.WithTx(ctx, func(tx Querier) error {
		var err error
		cond, args := inWorkspace(ctx, "workspace_id")
		m, err = scanMachine(tx.QueryRow(ctx, `UPDATE machines SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`+cond+` RETURNING `+machineCols,
			append([]any{at.UnixNano(), id}, args...)...))
		return notFound(err, "machine", id)
	})
	return m, err
}
