package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/app"
)

const edgeBodyTimeout = 300 * time.Millisecond

// startEdges starts a server with the body timeout edgeBodyTimeout.
func startEdges(t *testing.T) *server {
	t.Helper()
	return startWith(t, options{}, func(c *app.Config) { c.HTTP.BodyTimeout = edgeBodyTimeout })
}

// sendSlowly sends head, then one byte of body every 100 ms until the
// server closes the connection or the test ends, and returns what the
// server answered, if anything, and how long after head the connection
// ended. It gives up after 5 s.
func sendSlowly(t *testing.T, url, head string) (resp *http.Response, after time.Duration) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	conn.SetReadDeadline(start.Add(5 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				if _, err := io.WriteString(conn, " "); err != nil {
					return
				}
			}
		}
	})
	defer wg.Wait()
	defer close(stop)
	br := bufio.NewReader(conn)
	resp, err = http.ReadResponse(br, nil)
	if err == nil {
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	// Then the connection ends: EOF, or a reset over the unread body.
	var ne net.Error
	if _, err := br.ReadByte(); err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the connection is still open after %s", strings.SplitN(head, "\r\n", 2)[0], time.Since(start))
	}
	return resp, time.Since(start)
}

// TestSlowBodiesAreCut: a client that sends its body a byte at a time
// (never idle for the body timeout) is cut at the body timeout, on an API
// endpoint (408) and on the executor token endpoint, whose handler never
// reads the body.
func TestSlowBodiesAreCut(t *testing.T) {
	s := startEdges(t)
	for _, tc := range []struct {
		head   string
		status int
	}{
		{"POST /v1/sessions HTTP/1.1\r\nHost: reins\r\nx-api-key: " + s.key + "\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", http.StatusRequestTimeout},
		{"POST /v1/executor/tokens HTTP/1.1\r\nHost: reins\r\nAuthorization: Bearer reins_ek_nothing\r\nContent-Length: 1000\r\n\r\n{", http.StatusUnauthorized},
	} {
		resp, after := sendSlowly(t, s.url, tc.head)
		line := strings.SplitN(tc.head, "\r\n", 2)[0]
		if resp == nil || resp.StatusCode != tc.status {
			t.Errorf("%s: answered %v, want %d", line, resp, tc.status)
		}
		if after < edgeBodyTimeout || after > edgeBodyTimeout+2*time.Second {
			t.Errorf("%s: cut after %s, want about %s", line, after, edgeBodyTimeout)
		}
	}
}

// TestLongRequestsOutliveTheBodyTimeout: what lasts longer than the body
// timeout is not cut by it: an SSE stream, a long poll of the work queue,
// an executor's WebSocket, and a kept-alive connection's next POST.
func TestLongRequestsOutliveTheBodyTimeout(t *testing.T) {
	s := startEdges(t)
	sess := s.newSession(t, s.newAgent(t, "scripted").ID, s.newEnv(t, "long").ID)
	st := s.openStream(t, sess.ID)
	envID, envKey := s.selfHosted(t, "long hands") // no sessions: its queue stays empty

	var disconnects atomic.Int32
	c := executor.NewClient(executor.Options{URL: s.url, EnvironmentKey: envKey, Executor: executor.ExecutorInfo{Name: "long"},
		Workspace: t.TempDir(), OnEvent: func(e executor.Event) {
			if e.Type == executor.EventDisconnected {
				disconnects.Add(1)
			}
		}})
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- c.Run(ctx) }()
	defer func() {
		cancel()
		<-ran
	}()
	waitExecutors(t, s, envID, 1, 10*time.Second)

	polled := time.Now()
	var item any = "unset"
	if status, err := callBearer(s.url, envKey, "GET", "/v1/environments/"+envID+"/work/poll?block_ms=999", nil, &item); status != http.StatusOK || err != nil || item != nil {
		t.Fatalf("long poll: %d %v %v", status, err, item)
	}
	if d := time.Since(polled); d < 900*time.Millisecond {
		t.Fatalf("the long poll returned after %s, not after block_ms", d)
	}
	time.Sleep(3 * edgeBodyTimeout)

	s.send(t, sess.ID, userMessage("still there?"))
	st.until(isIdle)
	if n := disconnects.Load(); n != 0 {
		t.Errorf("the executor's WebSocket was cut %d times", n)
	}
	waitExecutors(t, s, envID, 1, time.Second)
}
