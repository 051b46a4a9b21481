package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// readyTimeout bounds the write check of /readyz.
const readyTimeout = 2 * time.Second

// writeChecker tells whether the database takes writes (the store is
// one).
type writeChecker interface {
	// CheckWrite commits a small write: nil when the database takes
	// writes, else store.ErrUnavailable or store.ErrFull.
	CheckWrite(ctx context.Context) error
}

// readiness serves /readyz.
type readiness struct {
	st  writeChecker
	log *slog.Logger
}

// ServeHTTP answers whether the server can take work now: 200
// {"status":"ready"} when its database commits a write (store.CheckWrite),
// else 503 {"status":"unavailable","reason":…} with retry-after. Unlike
// /healthz (the process serves HTTP: a restart would not help), it says
// whether sends would be stored; a load balancer sends elsewhere meanwhile.
func (rd readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	err := rd.st.CheckWrite(ctx)
	if err == nil {
		writeJSON(w, map[string]string{"status": "ready"})
		return
	}
	reason := "the database does not take writes"
	switch {
	case errors.Is(err, store.ErrFull):
		reason = "the database's storage is full"
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		reason = "the database cannot be reached"
	}
	rd.log.Warn("not ready: the database write check failed", "err", err)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("retry-after", strconv.Itoa(int(storeRetryAfter/time.Second)))
	w.WriteHeader(http.StatusServiceUnavailable)
	json.NewEncoder(w).Encode(map[string]string{"status": "unavailable", "reason": reason})
}
