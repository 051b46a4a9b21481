// Package fakeopenai is a fake OpenAI-compatible Chat Completions API for
// tests: a real HTTP server on loopback that streams chat.completion.chunk
// events ending with data: [DONE], answers each call with the next scripted
// Response and records the requests it received. A stream sends the usage
// chunk only when the request asks for it (stream_options.include_usage);
// a call that does not ask for a stream ("stream": true) gets the whole
// chat.completion as JSON (unless its Response is scripted to break a
// stream). Calls to any path ending in
// /chat/completions are served, so both srv.URL and srv.URL+"/v1" work as a
// base URL.
//
//	srv := fakeopenai.New(t)
//	srv.Push(fakeopenai.Failure(429, "rate_limit_error", "slow down").WithHeader("retry-after", "2"))
//	srv.Push(fakeopenai.Reply(fakeopenai.ToolCall("call_1", "bash", `{"command":"ls"}`)))
//	p := openai.New(openai.Options{BaseURL: srv.URL + "/v1", HTTPClient: srv.Client()})
package fakeopenai

import (
	"net/http"
	"strings"
	"testing"

	"github.com/reinsdev/reins/internal/fakeserver"
)

// Request is a call the server received; Body is its decoded JSON.
type Request = fakeserver.Request

// Server is a fake Chat Completions API. Its URL is the base URL to
// configure.
type Server struct {
	*fakeserver.Server[Response]
}

// New starts a server that shuts down when t's test ends. A call that
// finds no scripted response gets a 500 server_error and fails the test.
func New(t testing.TB) *Server {
	t.Helper()
	return &Server{fakeserver.Start(t, fakeserver.Config[Response]{
		Match: func(r *http.Request) bool {
			return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/chat/completions")
		},
		Serve: serve,
		Empty: func(w http.ResponseWriter) {
			writeError(w, http.StatusInternalServerError, nil, "server_error", nil, "fakeopenai: no scripted response")
		},
	})}
}

func errorBody(errType string, code any, msg string) map[string]any {
	return map[string]any{"error": map[string]any{"message": msg, "type": errType, "param": nil, "code": code}}
}

func writeError(w http.ResponseWriter, status int, h http.Header, errType string, code any, msg string) {
	w.Header().Set("x-request-id", "req_fake")
	fakeserver.WriteJSON(w, status, h, errorBody(errType, code, msg))
}
