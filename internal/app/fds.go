package app

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/ids"
	ma "github.com/reinsdev/reins/managedagents"
)

// Every client connection holds an open file, and a process out of open
// files accepts no connection at all, /healthz included. So the server
// divides its open-file limit: a reserve for itself (the store, logs,
// sandboxes, executors' and model providers' connections, refusals being
// answered), and the rest for client connections, half of which event
// streams and work polls may hold, the other half requests. The Go runtime
// raised the soft limit to the hard limit as the process started (and
// gives child processes the limit they would have had), so the budget is
// the most the machine lets this process have.

// fdBudget is the open-file limit divided.
type fdBudget struct {
	limit int // the process's open-file limit
	// connections bounds the client connections open at once (the
	// listener's bound); streams and requests share them.
	connections, streams, requests int
}

// budgetOf divides the open-file limit limit: an eighth, at least 64
// (half of a limit under 128), is kept for the server's own files.
func budgetOf(limit int) fdBudget {
	reserve := max(limit/8, min(64, limit/2))
	conns := limit - reserve
	return fdBudget{limit: limit, connections: conns, streams: conns / 2, requests: conns - conns/2}
}

// defaultOpenFiles is the budget's limit when the process's cannot be
// read: the usual soft limit.
const defaultOpenFiles = 1024

// openFileLimit returns the process's open-file limit (the soft limit of
// RLIMIT_NOFILE), or 0 when it cannot be read or is beyond an int.
func openFileLimit() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur > 1<<30 {
		return 0
	}
	return int(lim.Cur)
}

// fit bounds the API's streams and requests at once by the budget:
// a bound of 0 (none) becomes the budget's, and one over it is lowered to
// it, with a warning naming the flag.
func (b fdBudget) fit(hc *httpapi.Config, log *slog.Logger) {
	fit := func(bound *int, budget int, flag string) {
		if *bound > budget {
			log.Warn("the open-file limit is too low for "+flag+"; lowered to what it allows (raise the limit: ulimit -n, or LimitNOFILE= under systemd)",
				"open_file_limit", b.limit, flag, *bound, "lowered_to", budget)
		}
		if *bound <= 0 || *bound > budget {
			*bound = budget
		}
	}
	fit(&hc.MaxStreams, b.streams, "max_streams")
	fit(&hc.MaxRequests, b.requests, "max_requests")
	log.Info("open-file limit divided", "open_file_limit", b.limit, "connections", b.connections,
		"streams_and_polls", hc.MaxStreams, "requests", hc.MaxRequests)
}

// refusers bounds the connections over the bound being answered at once;
// more are closed unanswered.
const refusers = 16

// refuseWithin bounds the time a refused connection is served.
const refuseWithin = time.Second

// boundedListener accepts at most bound connections open at once. A
// connection over the bound is answered without the API, on the
// reserve: 200 to GET /healthz, else 503 overloaded_error with
// retry-after, and closed; so a flood of connections never takes the
// files the store and the health check need.
type boundedListener struct {
	net.Listener
	bound int64
	open  atomic.Int64 // connections accepted and not closed
	// slots holds a token per refusal being answered.
	slots chan struct{}
	wg    sync.WaitGroup // the refusals being answered

	mu     sync.Mutex // guards closed, and wg's additions against Close's Wait
	closed bool
}

func newBoundedListener(ln net.Listener, bound int) *boundedListener {
	return &boundedListener{Listener: ln, bound: int64(bound), slots: make(chan struct{}, refusers)}
}

// Accept returns the next connection within the bound.
func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.open.Add(1) <= l.bound {
			return &countedConn{Conn: c, l: l}, nil
		}
		l.open.Add(-1)
		l.refuse(c)
	}
}

// Close closes the listener and waits for the refusals being answered.
func (l *boundedListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	err := l.Listener.Close()
	l.wg.Wait()
	return err
}

// refuse answers c over the bound, or closes it when refusers are busy.
func (l *boundedListener) refuse(c net.Conn) {
	select {
	case l.slots <- struct{}{}:
	default:
		c.Close()
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		<-l.slots
		c.Close()
		return
	}
	l.wg.Go(func() { // owned by the listener: Close waits for it

		defer func() { <-l.slots }()
		defer c.Close()
		c.SetDeadline(time.Now().Add(refuseWithin))
		req, err := http.ReadRequest(bufio.NewReaderSize(c, 4096))
		if err != nil {
			return
		}
		if req.Method == http.MethodGet && req.URL.Path == "/healthz" {
			writeRaw(c, http.StatusOK, "", `{"status":"ok"}`)
			return
		}
		body := fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"the server has %d connections open, its bound (sized from its open-file limit); retry after the time in retry-after"},"request_id":%q}`,
			ma.ErrOverloaded, l.bound, ids.New(ids.Request))
		writeRaw(c, http.StatusServiceUnavailable, "retry-after: 1\r\nretry-after-ms: 1000\r\n", body)
	})
}

// writeRaw writes an HTTP/1.1 response with a JSON body on c, then ends
// c's writing side and reads what the client still sends (a request body)
// until it closes: closing with unread input would reset the connection,
// and the client could lose the answer.
func writeRaw(c net.Conn, status int, headers, body string) {
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n%s",
		status, http.StatusText(status), len(body)+1, headers, body+"\n")
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	io.Copy(io.Discard, io.LimitReader(c, 1<<20))
}

// countedConn gives its place back to its listener when closed.
type countedConn struct {
	net.Conn
	l    *boundedListener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// CloseWrite half-closes the connection, as net/http does before closing
// one with input left unread (so that the client gets the answer).
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ReadFrom lets net/http copy a body to the connection the kernel's way
// (sendfile, splice) where the connection can.
func (c *countedConn) ReadFrom(r io.Reader) (int64, error) { return io.Copy(c.Conn, r) }
