package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy forwards TCP connections to a server and can cut them all at
// once, as a network failure would.
type cutProxy struct {
	addr  string
	mu    sync.Mutex
	conns map[net.Conn]bool
	held  bool // new connections are closed at once
}

// hold makes the proxy close new connections at once (true) or forward
// them again (false).
func (p *cutProxy) hold(on bool) {
	p.mu.Lock()
	p.held = on
	p.mu.Unlock()
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String(), conns: make(map[net.Conn]bool)}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.cut()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			held := p.held
			p.mu.Unlock()
			if held {
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[u] = true, true
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				io.Copy(dst, src)
				dst.Close()
				src.Close()
				p.mu.Lock()
				delete(p.conns, dst)
				delete(p.conns, src)
				p.mu.Unlock()
			}
			wg.Go(func() { pipe(u, c) })
			wg.Go(func() { pipe(c, u) })
		}
	})
	return p
}

// cut closes every forwarded connection and returns how many pairs it cut.
func (p *cutProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
	n := len(p.conns) / 2
	clear(p.conns)
	return n
}
