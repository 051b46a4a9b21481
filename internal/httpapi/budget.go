package httpapi

import (
	"context"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"

	ma "github.com/reinsdev/reins/managedagents"
)

// The bytes a request may hold without a budget, and the budgets' defaults.
// An event may be as large as a request body (MaxBody, 32 MiB): the log
// reads of lists and streams take at most these many bytes of event JSON at
// once, and an event larger than that is read alone, within the event
// budget.
const (
	// listPageBytes bounds the event JSON of one page of the events list.
	listPageBytes = 8 << 20
	// streamChunkBytes bounds the event JSON a stream reads from the
	// store at once.
	streamChunkBytes = 1 << 20

	// DefaultBodyBudget is Config.BodyBudget's default.
	DefaultBodyBudget = 128 << 20
	// DefaultEventBudget is Config.EventBudget's default.
	DefaultEventBudget = 64 << 20
	// defaultBudgetWait is Config.BudgetWait's default.
	defaultBudgetWait = 2 * time.Second
	// overloadedRetryAfter is the retry-after of a request refused for
	// lack of budget, in seconds.
	overloadedRetryAfter = 1
)

// memory is what bounds the server's memory beyond the limits of single
// requests: the budgets, the shared reads of large log entries, and the
// return of memory to the OS after bursts.
type memory struct {
	// bodies bounds the content-carrying request bodies being handled.
	bodies *budget
	// events bounds the large events read for lists and streams.
	events *budget
	large  *largeReads
	// reclaim is told what the budgets hold.
	reclaim *reclaimer
}

func newMemory(cfg Config) *memory {
	m := &memory{reclaim: newReclaimer()}
	m.bodies, m.events = newBudget(cfg.BodyBudget, m.reclaim), newBudget(cfg.EventBudget, m.reclaim)
	m.large = newLargeReads(cfg.Store, m.events)
	return m
}

// close cancels a pending return of memory.
func (m *memory) close() { m.reclaim.close() }

// budget bounds the bytes of one kind of large payload that requests hold
// at once: content-carrying request bodies being decoded and handled, or
// large events read from the store for streams and lists.
type budget struct {
	sem  *semaphore.Weighted
	size int64
	// held is told the bytes taken and given back, across budgets.
	held *reclaimer
}

func newBudget(size int64, held *reclaimer) *budget {
	return &budget{sem: semaphore.NewWeighted(size), size: size, held: held}
}

// acquire takes n bytes of the budget (all of it when n is larger),
// waiting until they are free or ctx ends. release gives them back; it may
// be called more than once.
func (b *budget) acquire(ctx context.Context, n int64) (release func(), err error) {
	n = min(max(n, 0), b.size)
	if n == 0 {
		return func() {}, nil
	}
	if err := b.sem.Acquire(ctx, n); err != nil {
		return nil, err
	}
	b.held.add(n)
	var once sync.Once
	return func() {
		once.Do(func() {
			b.sem.Release(n)
			b.held.add(-n)
		})
	}, nil
}

// admit is acquire for a request that may be refused: one that cannot get
// its share of b within Config.BudgetWait is answered 503
// overloaded_error, with retry-after (the SDKs retry it).
func (s *Server) admit(r *http.Request, b *budget, n int64) (release func(), err error) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.BudgetWait)
	defer cancel()
	release, err = b.acquire(ctx, n)
	if err != nil {
		e := errf(http.StatusServiceUnavailable, ma.ErrOverloaded, "the server is handling too many large requests; retry shortly")
		e.retryAfter = overloadedRetryAfter
		return nil, e
	}
	return release, nil
}

// bodyBudget wraps the handler of a content-carrying request: it runs once
// the request's Content-Length (MaxBody when unknown) fits the body budget,
// which it holds until it returns. Decoding a body into Go values costs
// several times its size, and so does what the handler does with them.
func (s *Server) bodyBudget(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		n := r.ContentLength
		if n < 0 {
			n = s.cfg.MaxBody
		}
		n = min(n, s.cfg.MaxBody)
		release, err := s.admit(r, s.mem.bodies, n)
		if err != nil {
			return err
		}
		defer release()
		if r.ContentLength > 0 {
			r = r.WithContext(context.WithValue(r.Context(), bodySizeKey{}, n))
		}
		return h(w, r)
	}
}

// Memory return after bursts.
const (
	// reclaimBurst is the bytes of budget held at once from which a burst
	// is worth returning memory after.
	reclaimBurst = 16 << 20
	// reclaimSettle lets the handlers of a finished burst return before
	// its memory is collected.
	reclaimSettle = 500 * time.Millisecond
	// reclaimEvery spaces the returns (each costs a full collection), and
	// is the first interval of the trail.
	reclaimEvery = 5 * time.Second
	// reclaimTrail is how long after a burst memory is returned again.
	reclaimTrail = 2 * time.Minute
)

// reclaimer returns memory to the OS after bursts of large payloads. The
// Go runtime keeps the heap it grew for them and gives it back slowly (the
// issue measured minutes at 1.3 GB after six 30 MiB events). Once the bytes
// held in the budgets come back to zero after reaching reclaimBurst, the
// reclaimer runs free (debug.FreeOSMemory: a collection, then every free
// page back to the OS) off the request path, after reclaimSettle, then
// again at doubling intervals from reclaimEvery for reclaimTrail: what a
// burst sets off frees memory later (turns that read the events, session
// runners that keep them until they exit). Returns are at least
// reclaimEvery apart and skipped while a burst is under way; a burst that
// ends starts the trail over. Only a trail has a goroutine; close stops it.
type reclaimer struct {
	burst                int64
	settle, every, trail time.Duration
	free                 func()

	mu       sync.Mutex // guards inflight, peak, running and closed
	inflight int64      // bytes held in the budgets
	peak     int64      // the most held since inflight was last zero
	running  bool       // a trail's goroutine runs
	closed   bool
	ended    chan struct{} // a burst ended (buffered)
	stop     chan struct{}
	wg       sync.WaitGroup
}

func newReclaimer() *reclaimer {
	return &reclaimer{burst: reclaimBurst, settle: reclaimSettle, every: reclaimEvery, trail: reclaimTrail,
		free: debug.FreeOSMemory, ended: make(chan struct{}, 1), stop: make(chan struct{})}
}

// add counts n bytes taken (negative: given back) and starts a trail when
// a burst ends.
func (r *reclaimer) add(n int64) {
	r.mu.Lock()
	r.inflight += n
	r.peak = max(r.peak, r.inflight)
	if r.inflight > 0 {
		r.mu.Unlock()
		return
	}
	burst := r.peak >= r.burst
	r.peak = 0
	if !burst || r.closed {
		r.mu.Unlock()
		return
	}
	if !r.running {
		r.running = true
		r.wg.Go(r.run)
	}
	select {
	case r.ended <- struct{}{}:
	default: // the trail has yet to see an earlier end
	}
	r.mu.Unlock()
}

// run is a trail: it returns memory on the schedule of reclaimer, and
// ends once the trail is over with no burst ended meanwhile.
func (r *reclaimer) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	var last, until time.Time // the last return; the trail's end
	var interval time.Duration
	restart := func() {
		wait := max(r.settle, time.Until(last.Add(r.every)))
		t.Reset(wait)
		interval, until = r.every, time.Now().Add(wait+r.trail)
	}
	for {
		select {
		case <-r.stop:
			r.mu.Lock()
			r.running = false
			r.mu.Unlock()
			return
		case <-r.ended:
			restart()
			continue
		case <-t.C:
		}
		r.mu.Lock()
		idle := r.inflight == 0
		r.mu.Unlock()
		if idle {
			r.free()
			last = time.Now()
		}
		if time.Now().Add(interval).After(until) {
			r.mu.Lock()
			select {
			case <-r.ended: // a burst ended meanwhile: start over
				r.mu.Unlock()
				restart()
				continue
			default:
				r.running = false
				r.mu.Unlock()
				return
			}
		}
		t.Reset(interval)
		interval *= 2
	}
}

// close stops a trail and waits for a return under way.
func (r *reclaimer) close() {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	r.wg.Wait()
}
