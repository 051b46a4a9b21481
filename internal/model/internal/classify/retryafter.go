// Package classify holds the failure classification shared by the model
// providers: HTTP status and error codes to model.Kind, the retry-after
// headers, and transport failures.
package classify

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxRetryAfter caps the delay a server may ask for, so that a bogus header
// cannot park a session for days. The harness applies its own policy on top.
const maxRetryAfter = time.Hour

// RetryAfter returns the delay h asks for: retry-after-ms (milliseconds)
// first, then retry-after as seconds or as an HTTP date relative to now.
// It returns 0 when neither header holds a usable positive value.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < float64(maxRetryAfter/time.Millisecond) {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < maxRetryAfter.Seconds() {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 && d < maxRetryAfter {
			return d
		}
	}
	return 0
}
