package httpapi

import (
	"context"
	"net/http"
	"time"

	ma "github.com/reinsdev/reins/managedagents"
)

// shedWait is how long a request waits for a slot before it is refused,
// and the retry-after it is refused with.
const shedWait = time.Second

// shedder bounds the API requests handled at once. Event streams, work
// polls and executor connections are apart: they last, and have bounds
// of their own (streams per key, the executors' sessions). A request
// over the bound waits up to shedWait for a slot, then gets 503
// overloaded_error with retry-after, which the SDKs retry; so a burst far
// over what the machine can take queues briefly, is refused early and
// cheaply beyond that, and never holds more than the bound in memory.
type shedder struct {
	slots chan struct{} // nil: no bound
}

func newShedder(n int) *shedder {
	s := &shedder{}
	if n > 0 {
		s.slots = make(chan struct{}, n)
	}
	return s
}

// enter takes a slot for r, or refuses it; release gives the slot back.
func (s *shedder) enter(ctx context.Context, pattern string) (release func(), err error) {
	if s.slots == nil || lasting(pattern) {
		return func() {}, nil
	}
	select {
	case s.slots <- struct{}{}:
		return s.leave, nil
	default:
	}
	t := time.NewTimer(shedWait)
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return s.leave, nil
	case <-t.C:
		e := errf(http.StatusServiceUnavailable, ma.ErrOverloaded, "the server is handling %d requests at once, its bound; retry after the time in retry-after", cap(s.slots))
		e.retryAfter = shedWait
		return nil, e
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *shedder) leave() { <-s.slots }

// lasting reports whether a route holds its request for long by design.
func lasting(pattern string) bool {
	return pattern == "GET /v1/sessions/{id}/events/stream" || pattern == "GET /v1/environments/{id}/work/poll"
}
