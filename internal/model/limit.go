package model

import "context"

// A Limiter bounds how many model calls run at once. Callers over the
// bound wait for a slot: their turns stay running meanwhile.
type Limiter struct{ slots chan struct{} }

// NewLimiter returns a Limiter of n slots, or nil (no bound) when n <= 0.
func NewLimiter(n int) *Limiter {
	if n <= 0 {
		return nil
	}
	return &Limiter{slots: make(chan struct{}, n)}
}

// acquire takes a slot, or returns ctx's error if it ends first. A nil
// Limiter always has room.
func (l *Limiter) acquire(ctx context.Context) error {
	if l == nil {
		return nil
	}
	select {
	case l.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Limiter) release() {
	if l != nil {
		<-l.slots
	}
}

// Limit returns a Provider that calls p holding a slot of each limiter,
// taken in order; nil limiters are skipped. Give the narrower limiter
// first (a provider's own before the server's), so that a call waiting for
// its provider holds no slot another provider could use.
func Limit(p Provider, limiters ...*Limiter) Provider {
	return limited{p: p, limiters: limiters}
}

type limited struct {
	p        Provider
	limiters []*Limiter
}

// Stream implements Provider.
func (l limited) Stream(ctx context.Context, req *Request, sink Sink) (*Response, error) {
	for i, lim := range l.limiters {
		if err := lim.acquire(ctx); err != nil {
			for _, held := range l.limiters[:i] {
				held.release()
			}
			return nil, err
		}
	}
	defer func() {
		for _, lim := range l.limiters {
			lim.release()
		}
	}()
	return l.p.Stream(ctx, req, sink)
}
