// Package backoff computes retry delays: capped exponential backoff with
// full jitter.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is capped exponential backoff with full jitter: the delay before
// attempt n (1-based) is uniform in [0, min(Max, Base·2^(n-1))]. Full
// jitter spreads clients that failed together over the whole window, so
// they do not retry in step.
type Policy struct {
	// Base is the ceiling of the first delay; it must be positive.
	Base time.Duration
	// Max caps the ceiling; a Max below Base is taken as Base.
	Max time.Duration
	// Rand, if set, draws the jitter (tests use a seeded source);
	// otherwise math/rand/v2's global source does.
	Rand *rand.Rand
}

// Ceiling returns the largest delay of attempt n: min(Max, Base·2^(n-1)).
func (p Policy) Ceiling(n int) time.Duration {
	hi := max(p.Max, p.Base)
	d := p.Base
	for i := 1; i < n && d < hi; i++ {
		if d > hi/2 {
			return hi
		}
		d *= 2
	}
	return min(d, hi)
}

// Delay returns the delay before attempt n: uniform in [0, Ceiling(n)].
func (p Policy) Delay(n int) time.Duration {
	c := p.Ceiling(n)
	if c <= 0 {
		return 0
	}
	if p.Rand != nil {
		return time.Duration(p.Rand.Int64N(int64(c) + 1))
	}
	return rand.N(c + 1)
}
