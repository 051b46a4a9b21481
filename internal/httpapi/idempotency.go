package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	ma "github.com/reinsdev/reins/managedagents"
)

// idempotencyTTL is how long the outcome of a request made with an
// Idempotency-Key is kept: the request repeated with its key within it
// answers the first outcome, and changes nothing again.
const idempotencyTTL = 24 * time.Hour

// forgetEvery spaces the deletions of the outcomes older than
// idempotencyTTL.
const forgetEvery = time.Hour

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// idempotencyHeader is the header a client names a request with, so that
// it may repeat it (after a lost answer) without its change being made
// twice. No official SDK sends one by itself: a client sets it, and the
// SDKs' retries repeat it with the request.
const idempotencyHeader = "Idempotency-Key"

// idempotencyKey returns r's Idempotency-Key; "" when it has none. A key
// that is empty, too long or given twice is a 400.
func idempotencyKey(r *http.Request) (string, error) {
	vals := r.Header.Values(idempotencyHeader)
	switch {
	case len(vals) == 0:
		return "", nil
	case len(vals) > 1:
		return "", badRequest("the %s header is given %d times: give it once", idempotencyHeader, len(vals))
	case vals[0] == "" || len(vals[0]) > maxIdempotencyKey:
		return "", badRequest("the %s header must have 1 to %d characters", idempotencyHeader, maxIdempotencyKey)
	}
	return vals[0], nil
}

// idempotent is a request made with an Idempotency-Key: who made it (the
// key it was authenticated with), its key, and the hash of its method,
// path and body, fed as the handler reads the body.
type idempotent struct {
	scope, key string
	sum        hash.Hash
	at         time.Time
	// response is the body recorded with the change (a created session),
	// which the first answer sends too.
	response []byte
}

// outcomeStore is what the idempotency of requests keeps in the database
// (the store is one).
type outcomeStore interface {
	// IdempotentOutcome returns the outcome recorded for key in scope at
	// or after since; store.ErrNotFound if there is none.
	IdempotentOutcome(ctx context.Context, scope, key string, since time.Time) (store.IdempotentOutcome, error)
	// ForgetOutcomes deletes the outcomes recorded before t.
	ForgetOutcomes(ctx context.Context, before time.Time) (int64, error)
	// ReadLogRaw reads the events a send appended, undecoded.
	ReadLogRaw(ctx context.Context, sessionID string, after int64, limit int, maxBytes int64) ([]store.Entry, error)
}

// keeper answers the requests made with an Idempotency-Key: it records
// their outcomes with their changes and answers a repeated request the
// first outcome. Server embeds it, so that the handlers of every resource
// share it (and its hourly clean-up).
type keeper struct {
	st  outcomeStore
	log *slog.Logger
	// forgot is when aged-out idempotency keys were last deleted (Unix
	// nanoseconds).
	forgot atomic.Int64
}

func newKeeper(st outcomeStore, log *slog.Logger) *keeper { return &keeper{st: st, log: log} }

// idempotency returns r's Idempotency-Key as an idempotent (nil when it
// has none) and makes r's body feed its hash. Call it before the body is
// read.
func (k *keeper) idempotency(r *http.Request) (*idempotent, error) {
	key, err := idempotencyKey(r)
	if key == "" || err != nil {
		return nil, err
	}
	i := &idempotent{scope: principal(r).limitKey(), key: key, sum: sha256.New(), at: time.Now()}
	io.WriteString(i.sum, r.Method+" "+r.URL.Path+"\n")
	r.Body = teeBody{Reader: io.TeeReader(r.Body, i.sum), Closer: r.Body}
	return i, nil
}

type teeBody struct {
	io.Reader
	io.Closer
}

// jsonLine is v as writeJSON writes it.
func jsonLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	return append(b, '\n'), err
}

// hash identifies the request; its body must have been read.
func (i *idempotent) hash() string { return hex.EncodeToString(i.sum.Sum(nil)) }

// since is the oldest time of a record still kept.
func (i *idempotent) since() time.Time { return i.at.Add(-idempotencyTTL) }

// record returns what records the request's outcome, 200, last in the
// transaction of its change: the body respond makes from the
// transaction, or, with a nil respond, the events the change appended
// (first to the transaction's last). nil for a request without a key.
func (i *idempotent) record(respond func(tx store.Tx) ([]byte, error)) sessions.Record {
	if i == nil {
		return nil
	}
	return func(tx store.Tx, first int64) error {
		o := i.outcome()
		if respond == nil {
			o.FirstSeq, o.LastSeq = first, tx.LastSeq()
		} else {
			b, err := respond(tx)
			if err != nil {
				return err
			}
			o.Response, i.response = b, b
		}
		return tx.RecordOutcome(o, i.since())
	}
}

// outcome is the request's outcome, 200, without its answer.
func (i *idempotent) outcome() store.IdempotentOutcome {
	return store.IdempotentOutcome{Scope: i.scope, Key: i.key, RequestHash: i.hash(), Status: http.StatusOK, CreatedAt: i.at}
}

// createKept answers a create of a resource v with create, which stores
// it. With an Idempotency-Key, v is recorded as the request's outcome in
// the transaction of the create (store.WithOutcome), and a request that
// finds the key recorded meanwhile answers the outcome recorded.
func (k *keeper) createKept(w http.ResponseWriter, r *http.Request, i *idempotent, v any, create func(context.Context) error) error {
	ctx := r.Context()
	body, err := jsonLine(v)
	if err != nil {
		return err
	}
	if i != nil {
		o := i.outcome()
		o.Response = body
		ctx = store.WithOutcome(ctx, o, i.since())
	}
	if err := create(ctx); err != nil {
		return k.keyRecorded(w, r, i, err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
	return nil
}

// keyRecorded answers a change that failed with err: when its key was
// recorded by a request that committed first, the change is rolled back
// and the request answers that outcome; else err.
func (k *keeper) keyRecorded(w http.ResponseWriter, r *http.Request, i *idempotent, err error) error {
	if i == nil || !errors.Is(err, store.ErrKeyRecorded) {
		return err
	}
	_, err = k.replayOutcome(w, r, i)
	return err
}

// replayOutcome answers r with the outcome recorded for its key, if
// there is one, and reports whether it did. r's body must have been read.
func (k *keeper) replayOutcome(w http.ResponseWriter, r *http.Request, i *idempotent) (bool, error) {
	if i == nil {
		return false, nil
	}
	k.forgetOutcomes(r.Context(), i.at)
	o, err := k.st.IdempotentOutcome(r.Context(), i.scope, i.key, i.since())
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false, nil
	case err != nil:
		return false, err
	case o.RequestHash != i.hash():
		return false, errf(http.StatusUnprocessableEntity, ma.ErrInvalidRequest,
			"idempotency_key_reused: this %s was used in the last %.0f hours for another request (another method, path or body): use a new key for a new request",
			idempotencyHeader, idempotencyTTL.Hours())
	}
	body := o.Response
	if body == nil {
		if body, err = k.appended(r.Context(), o); err != nil {
			return false, err
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Idempotent-Replayed", "true")
	w.WriteHeader(o.Status)
	w.Write(body)
	return true, nil
}

// appended is the answer of a send: its events as appended, read from the
// log.
func (k *keeper) appended(ctx context.Context, o store.IdempotentOutcome) ([]byte, error) {
	n := int(o.LastSeq - o.FirstSeq + 1)
	entries, err := k.st.ReadLogRaw(ctx, o.SessionID, o.FirstSeq-1, n, 0)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(`{"data":[`)
	for k, e := range entries {
		if k > 0 {
			b.WriteByte(',')
		}
		b.Write(e.Raw)
	}
	b.WriteString("]}\n")
	return b.Bytes(), nil
}

// forgetOutcomes deletes the outcomes aged out by now, at most every
// forgetEvery (the first request with a key after that does it).
func (k *keeper) forgetOutcomes(ctx context.Context, now time.Time) {
	last := k.forgot.Load()
	if now.UnixNano()-last < int64(forgetEvery) || !k.forgot.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	if _, err := k.st.ForgetOutcomes(ctx, now.Add(-idempotencyTTL)); err != nil {
		k.log.Warn("forget aged-out idempotency keys", "err", err)
	}
}
