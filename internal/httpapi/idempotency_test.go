package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
)

// forgetfulStore records the cut-offs of ForgetOutcomes.
type forgetfulStore struct {
	store.Store
	before []time.Time
}

func (f *forgetfulStore) ForgetOutcomes(_ context.Context, before time.Time) (int64, error) {
	f.before = append(f.before, before)
	return 0, nil
}

// TestForgetOutcomesHourly: the outcomes older than a day are deleted by
// the first request with a key, then at most once an hour.
func TestForgetOutcomesHourly(t *testing.T) {
	st := &forgetfulStore{}
	s := newKeeper(st, slog.New(slog.DiscardHandler))
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for _, d := range []time.Duration{0, time.Minute, 59 * time.Minute, time.Hour, 90 * time.Minute, 2*time.Hour + time.Second} {
		s.forgetOutcomes(context.Background(), start.Add(d))
	}
	want := []time.Time{start.Add(-idempotencyTTL), start.Add(time.Hour - idempotencyTTL), start.Add(2*time.Hour + time.Second - idempotencyTTL)}
	if len(st.before) != len(want) {
		t.Fatalf("deleted before %v, want %v", st.before, want)
	}
	for i := range want {
		if !st.before[i].Equal(want[i]) {
			t.Fatalf("deleted before %v, want %v", st.before, want)
		}
	}
}

// TestIdempotencyKeyHeader: a key is optional; given, it has 1 to 255
// characters and is given once.
func TestIdempotencyKeyHeader(t *testing.T) {
	for _, tc := range []struct {
		vals []string
		key  string
		bad  bool
	}{
		{nil, "", false},
		{[]string{"k"}, "k", false},
		{[]string{strings.Repeat("k", 255)}, strings.Repeat("k", 255), false},
		{[]string{""}, "", true},
		{[]string{strings.Repeat("k", 256)}, "", true},
		{[]string{"a", "b"}, "", true},
	} {
		r := &http.Request{Header: http.Header{}}
		if tc.vals != nil {
			r.Header[idempotencyHeader] = tc.vals
		}
		key, err := idempotencyKey(r)
		if key != tc.key || (err != nil) != tc.bad {
			t.Errorf("Idempotency-Key %q: %q, %v", tc.vals, key, err)
		}
	}
}
