// Package fakeanthropic is a fake Anthropic Messages API for tests: a real
// HTTP server on loopback that speaks the streaming wire format (message_start,
// content_block_start/delta/stop, message_delta, message_stop, ping and error
// events), answers each call with the next scripted Response and records the
// requests it received. A call that does not ask for a stream ("stream":
// true) gets the whole message as JSON (unless its Response is scripted to
// break a stream). It does not validate requests: tests assert on Requests
// instead.
//
//	srv := fakeanthropic.New(t)
//	srv.Push(fakeanthropic.Failure(529, "overloaded_error", "Overloaded"))
//	srv.Push(fakeanthropic.Text("hi"))
//	p := anthropic.New(anthropic.Options{BaseURL: srv.URL, HTTPClient: srv.Client()})
//	...
//	body := srv.Requests()[1].Body // the decoded JSON of the second call
package fakeanthropic

import (
	"net/http"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/fakeserver"
)

// Request is a call the server received; Body is its decoded JSON.
type Request = fakeserver.Request

// Server is a fake Anthropic API. Its URL is the base URL to configure.
type Server struct {
	*fakeserver.Server[Response]
}

// New starts a server that shuts down when t's test ends. A call that
// finds no scripted response gets a 500 api_error and fails the test.
func New(t testing.TB) *Server {
	t.Helper()
	return &Server{fakeserver.Start(t, fakeserver.Config[Response]{
		Match: func(r *http.Request) bool {
			return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages")
		},
		Serve: serve,
		Empty: func(w http.ResponseWriter) {
			writeError(w, http.StatusInternalServerError, nil, "api_error", "fakeanthropic: no scripted response")
		},
	})}
}

func writeError(w http.ResponseWriter, status int, h http.Header, errType, msg string) {
	w.Header().Set("request-id", "req_fake")
	fakeserver.WriteJSON(w, status, h, map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": errType, "message": msg},
		"request_id": "req_fake",
	})
}
