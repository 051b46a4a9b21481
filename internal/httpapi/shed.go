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

// shedder bounds what the server holds at once, all keys together: the
// API requests being handled, and apart from them the lasting ones
// (event streams and work polls), which hold a connection, and so an
// open file, for as long as they last.
//
// A request over its bound waits up to shedWait for a slot (a lasting
// one does not wait: its slot frees when some stream ends, which cannot
// be foreseen), then gets 503 overloaded_error with retry-after, which
// the SDKs retry, and its connection is closed; so a burst far over what
// the machine can take queues briefly, is refused early and cheaply
// beyond that, and never holds more than the bounds in memory or in file
// descriptors.
type shedder struct {
	slots   chan struct{} // requests; nil: no bound
	lasting chan struct{} // streams and polls; nil: no bound
}

func newShedder(requests, lasting int) *shedder {
	s := &shedder{}
	if requests > 0 {
		s.slots = make(chan struct{}, requests)
	}
	if lasting > 0 {
		s.lasting = make(chan struct{}, lasting)
	}
	return s
}

// enter takes a slot for a request to the route pattern, or refuses it;
// release gives the slot back.
func (s *shedder) enter(ctx context.Context, pattern string) (release func(), err error) {
	if isLasting(pattern) {
		return s.enterLasting()
	}
	if s.slots == nil {
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
		return nil, overloaded("the server is handling %d requests at once, its bound; retry after the time in retry-after", cap(s.slots))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *shedder) leave() { <-s.slots }

// enterLasting takes a slot for an event stream or a work poll at once,
// or refuses it.
func (s *shedder) enterLasting() (release func(), err error) {
	if s.lasting == nil {
		return func() {}, nil
	}
	select {
	case s.lasting <- struct{}{}:
		return func() { <-s.lasting }, nil
	default:
		return nil, overloaded("the server has %d event streams and work polls open, its bound (--max-streams, sized from its open-file limit); retry after the time in retry-after", cap(s.lasting))
	}
}

// overloaded is a 503 overloaded_error to retry after shedWait, on a
// connection the server closes: a client refused for load gives its
// connection, and the file it holds, back.
func overloaded(format string, args ...any) *apiError {
	e := errf(http.StatusServiceUnavailable, ma.ErrOverloaded, format, args...)
	e.retryAfter = shedWait
	e.closeConn = true
	return e
}

// isLasting reports whether a route holds its request for long by design.
func isLasting(pattern string) bool {
	return pattern == streamPattern || pattern == "GET /v1/environments/{id}/work/poll"
}
