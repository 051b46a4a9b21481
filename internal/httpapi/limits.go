package httpapi

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	ma "github.com/reinsdev/reins/managedagents"
)

// KeyLimits bounds what one key (an API key, the bootstrap key, or an
// environment key) may ask of the server, as the hosted API does. A zero
// field sets no bound. Executor endpoints and /healthz are not limited.
//
// The rates are token buckets that hold ten seconds' worth of requests:
// a key may send that many at once, then at the steady rate.
type KeyLimits struct {
	// CreatesPerMinute bounds the requests that create a resource: POST
	// /v1/agents, /v1/environments, /v1/sessions, /v1/vaults,
	// /v1/vaults/{id}/credentials and /v1/environments/{id}/keys.
	CreatesPerMinute int
	// RequestsPerMinute bounds every other request; creates count only
	// against CreatesPerMinute.
	RequestsPerMinute int
	// Streams bounds the event streams a key has open at once.
	Streams int
}

// burstSeconds is how many seconds of its rate a bucket holds.
const burstSeconds = 10

// A bucket unused for bucketIdle has refilled (it refills in
// burstSeconds), so dropping it loses nothing; idle buckets are dropped
// at most every bucketIdle.
const bucketIdle = time.Minute

// streamRetry is the retry-after of a stream refused by the cap: a slot
// frees when one of the key's streams ends, which cannot be foreseen.
const streamRetry = time.Second

// limiter enforces KeyLimits. Only authenticated keys get buckets, so
// the maps hold at most the keys in use (in the last bucketIdle).
type limiter struct {
	cfg KeyLimits

	mu      sync.Mutex // guards the fields below
	buckets map[bucketKey]*bucket
	swept   time.Time
	streams map[string]int // open streams by key
}

type bucketKey struct {
	who     string
	creates bool
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// newLimiter returns a limiter of cfg, or nil when cfg sets no bound.
func newLimiter(cfg KeyLimits) *limiter {
	if cfg == (KeyLimits{}) {
		return nil
	}
	return &limiter{cfg: cfg, buckets: map[bucketKey]*bucket{}, streams: map[string]int{}}
}

// limitKey names the key p was authenticated with: the hash of an API key
// or environment key (one per key, as its id), the session of a sessions
// token (the tokens of a session's hand-outs share its limits and
// Idempotency-Keys), or the bootstrap key.
func (p Principal) limitKey() string {
	switch {
	case p.EnvironmentID != "":
		return "ek:" + p.hash
	case p.MachineID != "":
		return "mt:" + p.hash
	case p.Grant != nil:
		return "st:" + p.Grant.SessionID
	case p.hash != "":
		return "ak:" + p.hash
	}
	return "bootstrap"
}

// isCreate reports whether the route pattern creates a resource.
func isCreate(pattern string) bool {
	switch pattern {
	case "POST /v1/agents", "POST /v1/environments", "POST /v1/sessions", "POST /v1/vaults",
		"POST /v1/vaults/{id}/credentials", "POST /v1/environments/{id}/keys",
		"POST /v1/api_keys", "POST /v1/machines", "POST /v1/files", "POST /v1/sessions/{id}/resources",
		"POST /v1/skills", "POST /v1/skills/{id}/versions", "POST /v1/memory_stores", "POST /v1/dreams":
		return true
	}
	return false
}

// streamPattern is the route of the event stream.
const streamPattern = "GET /v1/sessions/{id}/events/stream"

// admit counts a request of who to the route pattern against the limits:
// a 429 rate_limit_error when it is over one. A stream holds its slot
// until release is called.
func (l *limiter) admit(who, pattern string) (release func(), err error) {
	release = func() {}
	if l == nil {
		return release, nil
	}
	if err := l.rate(who, isCreate(pattern), time.Now()); err != nil {
		return release, err
	}
	if pattern != streamPattern || l.cfg.Streams <= 0 {
		return release, nil
	}
	return l.openStream(who)
}

// rate takes a token at now from who's bucket of its class.
func (l *limiter) rate(who string, creates bool, now time.Time) error {
	perMinute, what := l.cfg.RequestsPerMinute, "requests"
	if creates {
		perMinute, what = l.cfg.CreatesPerMinute, "create requests"
	}
	if perMinute <= 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	k := bucketKey{who, creates}
	b := l.buckets[k]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(float64(perMinute)/60), max(1, perMinute*burstSeconds/60))}
		l.buckets[k] = b
	}
	b.used = now
	r := b.lim.ReserveN(now, 1)
	wait := r.DelayFrom(now)
	if wait == 0 {
		return nil
	}
	r.CancelAt(now)
	return rateLimited(wait, "rate limit exceeded: %d %s per minute per key; retry in %s", perMinute, what, wait.Round(time.Millisecond))
}

// sweep drops the buckets unused for bucketIdle, at most every bucketIdle.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.swept) < bucketIdle {
		return
	}
	l.swept = now
	for k, b := range l.buckets {
		if now.Sub(b.used) >= bucketIdle {
			delete(l.buckets, k)
		}
	}
}

// openStream takes one of who's stream slots.
func (l *limiter) openStream(who string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[who] >= l.cfg.Streams {
		return func() {}, rateLimited(streamRetry, "too many open event streams: at most %d per key; close one first", l.cfg.Streams)
	}
	l.streams[who]++
	var once sync.Once
	return func() { once.Do(func() { l.closeStream(who) }) }, nil
}

func (l *limiter) closeStream(who string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.streams[who]--; l.streams[who] <= 0 {
		delete(l.streams, who)
	}
}

// rateLimited is a 429 rate_limit_error to retry after wait.
func rateLimited(wait time.Duration, format string, args ...any) *apiError {
	e := errf(http.StatusTooManyRequests, ma.ErrRateLimit, format, args...)
	e.retryAfter = wait
	return e
}
