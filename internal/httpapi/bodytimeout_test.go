package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
)

// edgeFixture is a Server on a SQLite store behind an httptest server,
// with the bootstrap key sk-test.
type edgeFixture struct {
	srv *Server
	url string
	st  store.Store
}

// newEdgeFixture serves New(cfg) with its Store and Auth set; routes, if
// set, adds routes before it serves.
func newEdgeFixture(t *testing.T, cfg Config, routes func(*Server)) *edgeFixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "reins.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cfg.Store, cfg.Auth = st, &Authenticator{Keys: st, Bootstrap: "sk-test"}
	srv := New(cfg)
	if routes != nil {
		routes(srv)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	return &edgeFixture{srv: srv, url: hs.URL, st: st}
}

// do sends a request with key and returns the response, its body read.
func (f *edgeFixture) do(t *testing.T, key, method, path, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

const testBodyTimeout = 300 * time.Millisecond

// slowRequest sends head and then, until the connection fails or stop is
// closed, one byte of body every 100 ms: never idle for the body timeout,
// never done. It returns the connection, read deadline set at 5 s.
func slowRequest(t *testing.T, url, head string, stop <-chan struct{}) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(conn, " "); err != nil {
					return
				}
			}
		}
	}()
	return conn
}

// TestSlowBodyIsCut: a body sent a byte at a time is cut at the body
// timeout with a 408, and the connection is closed, though the client
// was never idle that long.
func TestSlowBodyIsCut(t *testing.T) {
	f := newEdgeFixture(t, Config{BodyTimeout: testBodyTimeout}, nil)
	stop := make(chan struct{})
	defer close(stop)
	start := time.Now()
	conn := slowRequest(t, f.url, "POST /v1/environments HTTP/1.1\r\nHost: reins\r\nx-api-key: sk-test\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", stop)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no response to a slow body after %s: %v", time.Since(start), err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var env struct {
		Error struct{ Type, Message string } `json:"error"`
	}
	json.Unmarshal(b, &env)
	if resp.StatusCode != http.StatusRequestTimeout || env.Error.Type != "invalid_request_error" || !strings.Contains(env.Error.Message, "not received within 300ms") {
		t.Errorf("slow body: %d %s", resp.StatusCode, b)
	}
	if d := time.Since(start); d < testBodyTimeout || d > testBodyTimeout+time.Second {
		t.Errorf("answered after %s, want about %s", d, testBodyTimeout)
	}
	// Closed with unread body bytes, the connection may end in a reset.
	var ne net.Error
	if _, err := br.ReadByte(); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the connection was not closed after the 408: %v", err)
	}
}

// TestBodyDeadlineEndsWithTheBody: once the body is read, the request may
// take longer than the body timeout: its context is not cancelled.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	f := newEdgeFixture(t, Config{BodyTimeout: testBodyTimeout}, func(s *Server) {
		s.handle("POST /test/slow", smallBody, func(w http.ResponseWriter, r *http.Request) error {
			if err := decode(r, &struct{ Name string }{}); err != nil {
				return err
			}
			if err := outlive(r, 3*testBodyTimeout); err != nil {
				return err
			}
			writeJSON(w, map[string]string{"status": "done"})
			return nil
		})
	})
	for i := range 2 { // the second on the kept-alive connection
		resp, b := f.do(t, "sk-test", "POST", "/test/slow", `{"Name":"x"}`)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "done") {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, b)
		}
	}
}

// TestStreamOutlivesBodyTimeout: a GET that streams its answer for longer
// than the body timeout is not cut, with no body or with one that its
// handler never reads.
func TestStreamOutlivesBodyTimeout(t *testing.T) {
	f := newEdgeFixture(t, Config{BodyTimeout: testBodyTimeout}, func(s *Server) {
		s.handle("GET /test/stream", smallBody, func(w http.ResponseWriter, r *http.Request) error {
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			if err := outlive(r, 3*testBodyTimeout); err != nil {
				return nil
			}
			io.WriteString(w, "done")
			return nil
		})
	})
	for _, body := range []string{"", "{}"} {
		resp, b := f.do(t, "sk-test", "GET", "/test/stream", body)
		if resp.StatusCode != http.StatusOK || string(b) != "done" {
			t.Errorf("stream with body %q: %d %q", body, resp.StatusCode, b)
		}
	}
}

// outlive waits d, or fails if r's context ends first.
func outlive(r *http.Request, d time.Duration) error {
	select {
	case <-r.Context().Done():
		return errors.New("request context ended: " + context.Cause(r.Context()).Error())
	case <-time.After(d):
		return nil
	}
}
