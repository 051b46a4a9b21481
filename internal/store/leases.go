package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors of session leases; match them with errors.Is.
var (
	// ErrLeaseHeld: another owner holds a live lease on the session. The
	// error is a *LeaseHeldError.
	ErrLeaseHeld = errors.New("store: session lease held by another owner")
	// ErrFenced: the fencing token is no longer the session's current one
	// (another owner took the lease over, or it was released), so the
	// write or renewal was refused.
	ErrFenced = errors.New("store: fenced off: the session lease has a newer token")
)

// Leases are the ownership leases of sessions: the process (replica) that
// runs a session holds its lease, renews it before it expires and releases
// it when it leaves. Each acquisition returns a fencing token larger than
// every earlier one of the session, and a write of the owner carries it
// (WithFence): once another owner has the lease, the old owner's writes
// fail with ErrFenced, however late they arrive.
//
// Expiry is measured by the database's clock where the database has one
// of its own (PostgreSQL), so the replicas' clocks do not matter.
type Leases interface {
	// AcquireSession takes the session's lease for ttl when it is free,
	// expired or already owner's, and returns a new fencing token. A live
	// lease of another owner is a *LeaseHeldError (ErrLeaseHeld); a
	// session that does not exist is ErrNotFound.
	AcquireSession(ctx context.Context, sessionID, owner string, ttl time.Duration) (token int64, err error)
	// RenewSession extends the lease to ttl from now. It fails with
	// ErrFenced when token is no longer the session's current one. A
	// lease that expired but was not taken over is renewed: its token
	// still fences every other owner out.
	RenewSession(ctx context.Context, sessionID, owner string, token int64, ttl time.Duration) error
	// RenewSessions is RenewSession for many leases of one owner at once,
	// in a few statements (the leases' SessionID and Token; their Owner is
	// ignored). It returns the sessions whose token is no longer current:
	// their leases were not renewed. An error renewed none, or some.
	RenewSessions(ctx context.Context, owner string, leases []Fence, ttl time.Duration) (fenced []string, err error)
	// ReleaseSession frees the lease at once (another owner may acquire it
	// without waiting for the expiry); ErrFenced when token is no longer
	// current.
	ReleaseSession(ctx context.Context, sessionID, owner string, token int64) error
	// HandOverSession passes the lease from owner to the owner to, for ttl
	// from now: owner's token is fenced off at once, to's next
	// AcquireSession succeeds (with a new token) and every other owner's
	// fails until the lease expires. ErrFenced when token is no longer
	// current.
	HandOverSession(ctx context.Context, sessionID, owner string, token int64, to string, ttl time.Duration) error
	// SessionLease returns the session's lease as it is now; a session
	// never leased has the zero Lease.
	SessionLease(ctx context.Context, sessionID string) (Lease, error)
	// UnownedSessions returns the sessions that have work (running or
	// rescheduling, or with queued input, and not terminated) and no live
	// lease but owner's ("" for none): a replica that wakes them takes
	// them over. A process starting under the name of one that crashed
	// passes that name, since the leases it left are its own.
	UnownedSessions(ctx context.Context, owner string) ([]string, error)
}

// Lease is the state of a session's lease.
type Lease struct {
	// Owner is "" when the lease was released or never taken.
	Owner string
	// Token is the latest fencing token handed out.
	Token int64
	// Until is when the lease expires, by the database's clock.
	Until time.Time
	// Live reports whether Owner holds it now (by the database's clock).
	Live bool
}

// LeaseHeldError is ErrLeaseHeld with who holds the lease and until when
// (by the database's clock).
type LeaseHeldError struct {
	SessionID string
	Owner     string
	Until     time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("session %s: lease held by %s until %s", e.SessionID, e.Owner, e.Until.Format(time.RFC3339Nano))
}

// Unwrap makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// Fence is what a write of a session's owner carries: the session, the
// owner and the fencing token its lease was acquired with.
type Fence struct {
	SessionID string
	Owner     string
	Token     int64
}

type fenceKey struct{}

// WithFence returns a context whose writes of f.SessionID through
// Sessions.UpdateSession are fenced: inside the write's transaction the
// store checks that f is still the session's current lease and fails with
// ErrFenced otherwise, writing nothing. Writes of other sessions with the
// context are not affected. A context without a fence writes unfenced (the
// API's writes: any replica accepts a client's input).
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence of ctx for the session, if it has one.
func FenceFrom(ctx context.Context, sessionID string) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok && f.SessionID == sessionID
}
