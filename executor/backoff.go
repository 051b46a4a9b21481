package executor

import (
	"math/rand/v2"
	"time"
)

// Default reconnect backoff bounds.
const (
	DefaultBackoffMin = 500 * time.Millisecond
	DefaultBackoffMax = 30 * time.Second
)

// backoff returns the delay before reconnect attempt n (1-based):
// exponential with full jitter, uniform in [0, min(max, min·2^(n-1))].
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return rand.N(d + 1)
}
