package mcptest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TokenEndpoint is an OAuth token endpoint on a loopback port that rotates
// refresh tokens as strict authorization servers do: the refresh token
// "rt-N" is good once, for the access token "at-(N+1)" and the refresh
// token "rt-(N+1)"; a refresh token already spent, or unknown, is
// invalid_grant. Its first grant uses "rt-1".
type TokenEndpoint struct {
	srv  *httptest.Server
	hold time.Duration

	mu      sync.Mutex    // guards the fields below
	current int           // N of the refresh token that is good now
	uses    int           // grant requests received
	refused []string      // refresh tokens refused: spent or unknown
	arrived chan struct{} // closed when a second request arrives
}

// StartTokenEndpoint starts a token endpoint; it is stopped when the test
// ends. hold, if positive, makes the first request wait up to hold for a
// second one before it is answered, so that callers racing to refresh are
// all in flight at once (a second request ends the wait at once).
func StartTokenEndpoint(t *testing.T, hold time.Duration) *TokenEndpoint {
	t.Helper()
	e := &TokenEndpoint{hold: hold, current: 1, arrived: make(chan struct{})}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

// URL is the endpoint's address.
func (e *TokenEndpoint) URL() string { return e.srv.URL }

// Uses returns how many grant requests arrived, and the refresh tokens it
// refused (spent already, or unknown).
func (e *TokenEndpoint) Uses() (int, []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.uses, append([]string(nil), e.refused...)
}

func (e *TokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "refresh_token" {
		http.Error(w, `{"error":"unsupported_grant_type"}`, http.StatusBadRequest)
		return
	}
	e.mu.Lock()
	e.uses++
	first := e.uses == 1
	if e.uses == 2 {
		close(e.arrived)
	}
	e.mu.Unlock()
	if first && e.hold > 0 {
		select {
		case <-e.arrived:
		case <-time.After(e.hold):
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	presented := r.Form.Get("refresh_token")
	if presented != fmt.Sprintf("rt-%d", e.current) {
		e.refused = append(e.refused, presented)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant","error_description":"refresh token already used"}`)
		return
	}
	e.current++
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":"at-%d","refresh_token":"rt-%d","token_type":"bearer","expires_in":3600}`, e.current, e.current)
}
