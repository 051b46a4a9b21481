package sessions

import (
	"context"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// Updater is the store's write of one session: fn runs in one transaction
// on the session's row and log, committed when fn returns nil.
type Updater interface {
	UpdateSession(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error)
}

// Writer is the write path of a session's runner: the harness records its
// model steps, tool results and status changes through it, with its own
// guard (lease fencing, crash recovery) inside fn. It is the only way to
// change a session besides the Service's typed operations, and both go
// through the same store transaction. A Writer is safe for concurrent use.
type Writer struct {
	st Updater
}

// NewWriter returns the Writer of the sessions in st. Make one per store
// and give it to both the harness and the Service (Config.Writer): the
// harness is built before the Service, which drives it.
func NewWriter(st Updater) *Writer { return &Writer{st: st} }

// Update runs fn in one transaction on the session and returns the
// session as committed. An error from fn is returned as is and nothing is
// written. Publishing the change is the caller's, after the commit. The
// events fn appends keep the session's outcome_evaluations (outcomeTx).
func (w *Writer) Update(ctx context.Context, id string, fn func(store.Tx) error) (ma.Session, error) {
	return w.st.UpdateSession(ctx, id, withOutcomes(fn))
}
