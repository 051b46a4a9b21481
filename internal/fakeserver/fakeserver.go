// Package fakeserver is the scripting and recording core shared by the fake
// model API servers (fakeanthropic, fakeopenai): a loopback HTTP server that
// answers each request with the next scripted response and records what it
// received.
package fakeserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Request is one request a fake server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Raw is the request body; Body is Raw decoded as JSON (nil if it is
	// not JSON).
	Raw  []byte
	Body map[string]any
}

// Handler answers one request with a scripted response. done is closed when
// the server closes; a handler that waits must also give up then.
type Handler[R any] func(w http.ResponseWriter, r *http.Request, body map[string]any, resp R, done <-chan struct{})

// Server is a fake API server scripted with responses of type R.
type Server[R any] struct {
	// URL is the base URL of the server (http://127.0.0.1:port).
	URL string

	srv   *httptest.Server
	serve Handler[R]
	match func(*http.Request) bool
	empty func(w http.ResponseWriter)
	done  chan struct{}
	once  sync.Once

	mu         sync.Mutex // guards the fields below
	queue      []R
	reqs       []Request
	unscripted int
	inFlight   int // scripted calls being answered
	peak       int // the most inFlight has been
}

// Config describes a fake API.
type Config[R any] struct {
	// Match reports whether a request is a call of the API; others get 404.
	Match func(*http.Request) bool
	// Serve answers a call with a scripted response.
	Serve Handler[R]
	// Empty answers a call when no response is scripted.
	Empty func(w http.ResponseWriter)
}

// Start starts a server on loopback and closes it when t's test ends,
// reporting calls that found no scripted response as test errors.
func Start[R any](t testing.TB, cfg Config[R]) *Server[R] {
	t.Helper()
	s := &Server[R]{serve: cfg.Serve, match: cfg.Match, empty: cfg.Empty, done: make(chan struct{})}
	s.srv = httptest.NewServer(http.HandlerFunc(s.handle))
	s.URL = s.srv.URL
	t.Cleanup(func() {
		s.Close()
		if n := s.Unscripted(); n > 0 {
			t.Errorf("fake model server: %d call(s) arrived with no scripted response", n)
		}
	})
	return s
}

// Push appends responses to the script; each call consumes the first.
func (s *Server[R]) Push(rs ...R) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, rs...)
}

// Pending returns how many scripted responses are not consumed yet.
func (s *Server[R]) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns the calls received so far, oldest first.
func (s *Server[R]) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// Unscripted returns how many calls found the script empty.
func (s *Server[R]) Unscripted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.unscripted
}

// PeakConcurrency returns the most scripted calls that were being
// answered at once.
func (s *Server[R]) PeakConcurrency() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Client returns an HTTP client for the server whose idle connections are
// closed with it.
func (s *Server[R]) Client() *http.Client { return s.srv.Client() }

// Close releases hanging calls, then shuts the server down. It is safe to
// call more than once.
func (s *Server[R]) Close() {
	s.once.Do(func() {
		close(s.done)
		s.srv.Close()
	})
}

func (s *Server[R]) handle(w http.ResponseWriter, r *http.Request) {
	if !s.match(r) {
		http.Error(w, `{"error":{"type":"not_found_error","message":"fake model server: unknown route"}}`, http.StatusNotFound)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var body map[string]any
	if json.Unmarshal(raw, &body) != nil {
		body = nil
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw, Body: body})
	if len(s.queue) == 0 {
		s.unscripted++
		s.mu.Unlock()
		s.empty(w)
		return
	}
	resp := s.queue[0]
	s.queue = s.queue[1:]
	s.inFlight++
	s.peak = max(s.peak, s.inFlight)
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	s.serve(w, r, body, resp, s.done)
}
