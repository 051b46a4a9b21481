package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// A session's lease is one row of session_leases, created at the first
// acquisition and kept (with an empty owner once released) until the
// session is deleted, so that its token only ever grows.

// AcquireSession implements store.Leases. Every acquisition increments the
// token, even by the owner of a live lease: a runner that left in the same
// process and releases late is then fenced off like any other.
func (s *Store) AcquireSession(ctx context.Context, sessionID, owner string, ttl time.Duration) (int64, error) {
	token, _, err := s.TakeSession(ctx, sessionID, owner, ttl)
	return token, err
}

// TakeSession is AcquireSession that also returns the lease it replaced
// (the zero Lease for a session never leased): an Owner other than "" is a
// lease its owner did not release, so one that had expired, unless owner
// is its own. What a takeover is, is the caller's to say.
func (s *Store) TakeSession(ctx context.Context, sessionID, owner string, ttl time.Duration) (int64, store.Lease, error) {
	var token int64
	var prev store.Lease
	err := s.d.WithTx(ctx, func(tx Querier) error {
		if _, err := tx.Exec(ctx, `INSERT INTO session_leases (session_id, owner, token, expires_at) SELECT id, ?, 0, 0 FROM sessions WHERE id = ? ON CONFLICT (session_id) DO NOTHING`,
			"", sessionID); err != nil {
			return err
		}
		l, now, err := s.readLease(ctx, tx, sessionID, s.lock(LockUpdate))
		if err != nil {
			return err
		}
		if l.Owner != "" && l.Owner != owner && l.Live {
			return &store.LeaseHeldError{SessionID: sessionID, Owner: l.Owner, Until: l.Until}
		}
		prev, token = l, l.Token+1
		_, err = tx.Exec(ctx, `UPDATE session_leases SET owner = ?, token = ?, expires_at = ? WHERE session_id = ?`,
			owner, token, now+ttl.Nanoseconds(), sessionID)
		return err
	})
	return token, prev, err
}

// RenewSession implements store.Leases.
func (s *Store) RenewSession(ctx context.Context, sessionID, owner string, token int64, ttl time.Duration) error {
	n, err := s.exec(ctx, `UPDATE session_leases SET expires_at = `+s.d.Now()+` + ? WHERE session_id = ? AND owner = ? AND token = ?`,
		ttl.Nanoseconds(), sessionID, owner, token)
	return fenced(n, err, sessionID, token)
}

// renewBatch is the most leases RenewSessions renews in one statement
// (two parameters each, within SQLite's and PostgreSQL's limits).
const renewBatch = 2000

// RenewSessions implements store.Leases: in one transaction, one UPDATE
// per renewBatch leases, matching each row on its session and token.
func (s *Store) RenewSessions(ctx context.Context, owner string, leases []store.Fence, ttl time.Duration) ([]string, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	var renewed map[string]bool
	err := s.d.WithTx(ctx, func(tx Querier) error {
		renewed = make(map[string]bool, len(leases))
		for chunk := range slices.Chunk(leases, renewBatch) {
			args := make([]any, 0, 2+2*len(chunk))
			args = append(args, ttl.Nanoseconds(), owner)
			rows := make([]string, len(chunk))
			for i, f := range chunk {
				rows[i] = "(CAST(? AS TEXT), CAST(? AS BIGINT))"
				args = append(args, f.SessionID, f.Token)
			}
			ids, err := collect(ctx, tx, scanString, `UPDATE session_leases SET expires_at = `+s.d.Now()+` + ? WHERE owner = ? AND (session_id, token) IN (VALUES `+
				strings.Join(rows, ", ")+`) RETURNING session_id`, args...)
			if err != nil {
				return err
			}
			for _, id := range ids {
				renewed[id] = true
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var fenced []string
	for _, f := range leases {
		if !renewed[f.SessionID] {
			fenced = append(fenced, f.SessionID)
		}
	}
	return fenced, nil
}

// ReleaseSession implements store.Leases.
func (s *Store) ReleaseSession(ctx context.Context, sessionID, owner string, token int64) error {
	n, err := s.exec(ctx, `UPDATE session_leases SET owner = ?, expires_at = 0 WHERE session_id = ? AND owner = ? AND token = ?`,
		"", sessionID, owner, token)
	return fenced(n, err, sessionID, token)
}

// HandOverSession implements store.Leases. The token grows, so owner's
// writes are fenced off at once, and to (the new owner) acquires it with a
// larger one still.
func (s *Store) HandOverSession(ctx context.Context, sessionID, owner string, token int64, to string, ttl time.Duration) error {
	n, err := s.exec(ctx, `UPDATE session_leases SET owner = ?, token = token + 1, expires_at = `+s.d.Now()+` + ? WHERE session_id = ? AND owner = ? AND token = ?`,
		to, ttl.Nanoseconds(), sessionID, owner, token)
	return fenced(n, err, sessionID, token)
}

// SessionLease implements store.Leases.
func (s *Store) SessionLease(ctx context.Context, sessionID string) (store.Lease, error) {
	l, _, err := s.readLease(ctx, s.r, sessionID, "")
	if errors.Is(err, store.ErrNotFound) {
		return store.Lease{}, nil
	}
	return l, err
}

// UnownedSessions implements store.Leases.
func (s *Store) UnownedSessions(ctx context.Context, owner string) ([]string, error) {
	unowned := ` AND NOT EXISTS (SELECT 1 FROM session_leases l WHERE l.session_id = %s AND l.owner <> ? AND l.owner <> ? AND l.expires_at > ` + s.d.Now() + `)`
	return collect(ctx, s.r, scanString,
		`SELECT id FROM sessions WHERE status IN (?, ?)`+fmt.Sprintf(unowned, "sessions.id")+
			` UNION SELECT DISTINCT e.session_id FROM events e JOIN sessions x ON x.id = e.session_id WHERE e.pending AND x.status <> ?`+fmt.Sprintf(unowned, "e.session_id"),
		ma.StatusRunning, ma.StatusRescheduling, "", owner, ma.StatusTerminated, "", owner)
}

// readLease reads the session's lease and the database's time; lock ends
// the query. A session without a lease row is ErrNotFound.
func (s *Store) readLease(ctx context.Context, db Querier, sessionID, lock string) (store.Lease, int64, error) {
	var l store.Lease
	var until, now int64
	err := db.QueryRow(ctx, `SELECT owner, token, expires_at, `+s.d.Now()+` FROM session_leases WHERE session_id = ?`+lock, sessionID).
		Scan(&l.Owner, &l.Token, &until, &now)
	if err != nil {
		return l, 0, notFound(err, "session lease", sessionID)
	}
	l.Live = l.Owner != "" && until > now
	if until > 0 {
		l.Until = time.Unix(0, until).UTC()
	}
	return l, now, nil
}

// checkFence fails with store.ErrFenced unless f is the session's current
// lease. It runs in the transaction of the write it guards, after the
// session row is locked, and locks the lease row until commit so that a
// takeover waits for the write (which its new owner then reads) or the
// write sees the takeover.
func (s *Store) checkFence(ctx context.Context, tx Querier, f store.Fence) error {
	var owner string
	var token int64
	err := tx.QueryRow(ctx, `SELECT owner, token FROM session_leases WHERE session_id = ?`+s.lock(LockShare), f.SessionID).Scan(&owner, &token)
	if errors.Is(err, sql.ErrNoRows) || err == nil && (owner != f.Owner || token != f.Token) {
		return fmt.Errorf("session %s: write of %s with token %d: %w", f.SessionID, f.Owner, f.Token, store.ErrFenced)
	}
	return err
}

// fenced turns a lease update that changed no row into store.ErrFenced.
func fenced(n int64, err error, sessionID string, token int64) error {
	if err == nil && n == 0 {
		return fmt.Errorf("session %s: lease token %d: %w", sessionID, token, store.ErrFenced)
	}
	return err
}
