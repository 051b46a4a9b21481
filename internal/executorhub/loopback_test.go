package executorhub

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/tool"
)

// tcpCutter forwards loopback TCP connections to a server and can cut
// every one of them at once, as a network failure would: no close frame,
// no FIN from the peer's side first.
type tcpCutter struct {
	ln    net.Listener
	to    string
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func newTCPCutter(t *testing.T, to string) *tcpCutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpCutter{ln: ln, to: to}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *tcpCutter) accept() {
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.to)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Go(func() { io.Copy(out, in); out.Close() })
		p.wg.Go(func() { io.Copy(in, out); in.Close() })
	}
}

func (p *tcpCutter) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func TestSocketDroppedMidToolOverLoopback(t *testing.T) {
	f := newFixture(t, HubOptions{})
	p := newTCPCutter(t, f.srv.Listener.Addr().String())
	ts := &testSessions{gate: make(chan struct{})}
	registered := make(chan struct{}, 16)
	started := make(chan struct{}, 16)
	f.client(executor.Options{URL: "http://" + p.ln.Addr().String(), Sessions: ts, Capabilities: testCaps, OnEvent: func(e executor.Event) {
		switch e.Type {
		case executor.EventRegistered:
			registered <- struct{}{}
		case executor.EventToolStarted:
			started <- struct{}{}
		}
	}})
	wait := func(ch chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	wait(registered, "registration")
	l := f.assign("s1", "block")
	type out struct {
		res tool.Result
		err error
	}
	outc := make(chan out, 1)
	go func() {
		res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "block"})
		outc <- out{res, err}
	}()
	wait(started, "the tool to start")
	p.cut() // the socket drops while the tool runs
	wait(registered, "the executor to register again")
	close(ts.gate) // the tool finishes after the reconnect
	var o out
	select {
	case o = <-outc:
	case <-time.After(10 * time.Second):
		t.Fatal("no result after the reconnect")
	}
	if o.err != nil || o.res.Content[0].Text != "ok block" {
		t.Fatalf("CallTool = %+v, %v", o.res, o.err)
	}
	if n := ts.runs.Load(); n != 1 {
		t.Fatalf("the tool ran %d times, want once", n)
	}
	select {
	case <-started:
		t.Fatal("the tool started again after the reconnect")
	default:
	}
	// The session goes on over the new socket, with a result in the
	// acknowledgement again.
	res, err := l.CallTool(context.Background(), tool.Call{ID: "c2", Name: "noop"})
	if err != nil || res.Content[0].Text != "ok noop" {
		t.Fatalf("CallTool after the reconnect = %+v, %v", res, err)
	}
}

func TestTokenExpiry4001OverLoopback(t *testing.T) {
	f := newFixture(t, HubOptions{TokenTTL: 1500 * time.Millisecond})
	ts := &testSessions{}
	registered := make(chan struct{}, 16)
	closed := make(chan int, 16)
	f.client(executor.Options{Sessions: ts, Capabilities: testCaps, OnEvent: func(e executor.Event) {
		switch e.Type {
		case executor.EventRegistered:
			registered <- struct{}{}
		case executor.EventDisconnected:
			closed <- executor.CloseCode(e.Err)
		}
	}})
	select {
	case <-registered:
	case <-time.After(10 * time.Second):
		t.Fatal("no registration")
	}
	l := f.assign("s1", "noop")
	select {
	case code := <-closed:
		if code != executor.CloseTokenExpired {
			t.Fatalf("connection closed with %d, want %d", code, executor.CloseTokenExpired)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hub did not close the connection when the token expired")
	}
	select {
	case <-registered:
	case <-time.After(10 * time.Second):
		t.Fatal("the executor did not reconnect with a new token")
	}
	res, err := l.CallTool(context.Background(), tool.Call{ID: "c1", Name: "noop"})
	if err != nil || res.Content[0].Text != "ok noop" {
		t.Fatalf("CallTool after the refresh = %+v, %v (the lease should have resumed)", res, err)
	}
	ts.mu.Lock()
	opened := ts.opened
	ts.mu.Unlock()
	if opened != 1 {
		t.Fatalf("session opened %d times, want 1 (resumed)", opened)
	}
}

func TestMaxReconnectAttemptsOverLoopback(t *testing.T) {
	f := newFixture(t, HubOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there any more
	attempts := 0
	c := f.client(executor.Options{URL: down, Sessions: &testSessions{}, Capabilities: testCaps, MaxReconnectAttempts: 3,
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond, OnEvent: func(e executor.Event) {
			if e.Type == executor.EventConnecting {
				attempts++
			}
		}})
	err = waitErr(t, c)
	if !errors.Is(err, executor.ErrReconnectExhausted) {
		t.Fatalf("Err = %v, want executor.ErrReconnectExhausted", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) {
		t.Fatalf("Err = %v, want it to wrap the last dial failure", err)
	}
	if attempts < 3 {
		t.Fatalf("%d connection attempts, want at least 3", attempts)
	}
}
