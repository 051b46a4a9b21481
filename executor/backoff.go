package executor

import (
	"time"

	"github.com/reinsdev/reins/backoff"
)

// Default reconnect backoff bounds.
const (
	DefaultBackoffMin = 500 * time.Millisecond
	DefaultBackoffMax = 30 * time.Second
)

// reconnectDelay returns the delay before reconnect attempt n (1-based):
// exponential with full jitter, uniform in [0, min(max, min·2^(n-1))].
func reconnectDelay(n int, lo, hi time.Duration) time.Duration {
	return backoff.Policy{Base: lo, Max: hi}.Delay(n)
}
