package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// apiError is an error with its HTTP status and envelope type.
type apiError struct {
	status  int
	typ     string
	message string
	// noRetry adds x-should-retry: false (deterministic 409s).
	noRetry bool
	// retryAfter, if set, is sent as retry-after (whole seconds, rounded
	// up) and retry-after-ms.
	retryAfter time.Duration
	// details, if set, is sent as error.details.
	details map[string]any
	// closeConn closes the connection after the answer (Connection:
	// close): a client refused for load gives its open file back.
	closeConn bool
	// conflictingMemoryID and conflictingPath, if set, are sent as
	// error.conflicting_memory_id and error.conflicting_path
	// (memory_path_conflict_error).
	conflictingMemoryID, conflictingPath *string
}

func (e *apiError) Error() string { return e.message }

func errf(status int, typ, format string, args ...any) *apiError {
	return &apiError{status: status, typ: typ, message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *apiError {
	return errf(http.StatusBadRequest, ma.ErrInvalidRequest, format, args...)
}

func notFound(format string, args ...any) *apiError {
	return errf(http.StatusNotFound, ma.ErrNotFound, format, args...)
}

func conflict(format string, args ...any) *apiError {
	e := errf(http.StatusConflict, ma.ErrInvalidRequest, format, args...)
	e.noRetry = true
	return e
}

// writeError answers err in the API's error envelope ({"type":"error",
// "error":{"type","message"},"request_id"}). Errors that
// are not *apiError map from the store's sentinels, else to 500 api_error
// (logged, with a generic message).
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, store.ErrNotFound):
		ae = notFound("%s", trimStore(err))
	case errors.Is(err, store.ErrConflict):
		ae = conflict("%s", trimStore(err))
	case errors.Is(err, store.ErrUnavailable):
		s.log.Warn("request refused: the database is unavailable", "method", r.Method, "path", r.URL.Path, "request_id", requestID(r), "err", err)
		ae = unavailable(err)
	default:
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "request_id", requestID(r), "err", err)
		ae = errf(http.StatusInternalServerError, ma.ErrAPI, "internal server error")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if ae.noRetry {
		h.Set("x-should-retry", "false")
	}
	if ae.closeConn {
		h.Set("Connection", "close")
	}
	if d := ae.retryAfter; d > 0 {
		h.Set("retry-after", strconv.FormatInt(int64(math.Ceil(d.Seconds())), 10))
		h.Set("retry-after-ms", strconv.FormatInt(int64(math.Ceil(float64(d)/float64(time.Millisecond))), 10))
	}
	w.WriteHeader(ae.status)
	json.NewEncoder(w).Encode(ma.ErrorEnvelope{Type: "error", Error: ma.ErrorBody{Type: ae.typ, Message: ae.message, Details: ae.details,
		ConflictingMemoryID: ae.conflictingMemoryID, ConflictingPath: ae.conflictingPath}, RequestID: requestID(r)})
}

// storeRetryAfter is the retry-after of a request refused because the
// database could not take it (store.ErrUnavailable).
const storeRetryAfter = 5 * time.Second

// unavailable is the answer to a request the database could not take: 503
// overloaded_error with retry-after, which the SDKs retry. What the driver
// said stays in the log.
func unavailable(err error) *apiError {
	e := errf(http.StatusServiceUnavailable, ma.ErrOverloaded, "the server's database is unavailable (a lost connection or a restart); retry after the time in retry-after")
	if errors.Is(err, store.ErrFull) {
		e.message = "the server cannot write: its database's storage is full; retry after the time in retry-after"
	}
	e.retryAfter = storeRetryAfter
	return e
}

// trimStore removes the "store: " prefix of a sentinel from a message.
func trimStore(err error) string {
	msg := err.Error()
	for _, s := range []error{store.ErrNotFound, store.ErrConflict} {
		suffix := ": " + s.Error()
		if len(msg) > len(suffix) && msg[len(msg)-len(suffix):] == suffix {
			what := msg[:len(msg)-len(suffix)]
			if errors.Is(s, store.ErrNotFound) {
				return what + " not found"
			}
			return what + " already exists or was changed concurrently"
		}
	}
	return msg
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}
