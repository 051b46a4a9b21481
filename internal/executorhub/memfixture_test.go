package executorhub

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/reinsdev/reins/executor"
)

// memNet is an in-memory network for tests inside a synctest bubble: the
// hub's HTTP server listens on it and clients dial it, so every goroutine
// blocks durably and fake time advances. It can drop every connection
// (a socket lost without a close handshake), refuse new ones, and go
// silent (freeze: nothing passes either way and nothing is closed, as
// when a network is cut between two hosts).
type memNet struct {
	ln  *memListener
	srv *http.Server

	mu      sync.Mutex // guards conns, refuse and clients
	conns   []net.Conn
	refuse  bool
	clients []*http.Transport

	fmu    sync.Mutex    // guards frozen (a connection's Close takes it under mu)
	frozen chan struct{} // closed at the thaw; nil when not frozen
}

// freeze stops every byte on the network, until thaw.
func (n *memNet) freeze() {
	n.fmu.Lock()
	defer n.fmu.Unlock()
	if n.frozen == nil {
		n.frozen = make(chan struct{})
	}
}

// thaw lets the bytes held by freeze pass.
func (n *memNet) thaw() {
	n.fmu.Lock()
	defer n.fmu.Unlock()
	if n.frozen != nil {
		close(n.frozen)
		n.frozen = nil
	}
}

// hold waits while the network is frozen, or until closed is.
func (n *memNet) hold(closed <-chan struct{}) {
	n.fmu.Lock()
	frozen := n.frozen
	n.fmu.Unlock()
	if frozen != nil {
		select {
		case <-frozen:
		case <-closed:
		}
	}
}

// freezableConn is a client connection of a memNet: while the network is
// frozen, what it reads is held and what it writes waits.
type freezableConn struct {
	net.Conn
	n      *memNet
	closed chan struct{}
	once   sync.Once
}

func (c *freezableConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.hold(c.closed)
	return k, err
}

func (c *freezableConn) Write(p []byte) (int, error) {
	c.n.hold(c.closed)
	return c.Conn.Write(p)
}

// Close closes the connection; while the network is frozen, the other end
// learns of it only once it thaws.
func (c *freezableConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	c.n.fmu.Lock()
	frozen := c.n.frozen
	c.n.fmu.Unlock()
	if frozen != nil {
		go func() {
			<-frozen
			c.Conn.Close()
		}()
		return nil
	}
	return c.Conn.Close()
}

func newMemNet(h http.Handler) *memNet {
	n := &memNet{ln: newMemListener(), srv: &http.Server{Handler: h}}
	go n.srv.Serve(n.ln)
	return n
}

func (n *memNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	refuse := n.refuse
	n.mu.Unlock()
	if refuse {
		return nil, &net.OpError{Op: "dial", Net: "memory", Err: errRefused}
	}
	c, err := n.ln.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	fc := &freezableConn{Conn: c, n: n, closed: make(chan struct{})}
	n.mu.Lock()
	n.conns = append(n.conns, fc)
	n.mu.Unlock()
	return fc, nil
}

type refusedError struct{}

func (refusedError) Error() string { return "connection refused" }

var errRefused = refusedError{}

func (n *memNet) httpClient() *http.Client {
	tr := &http.Transport{DialContext: n.dial}
	n.mu.Lock()
	n.clients = append(n.clients, tr)
	n.mu.Unlock()
	return &http.Client{Transport: tr}
}

// drop closes every client connection abruptly.
func (n *memNet) drop() {
	n.mu.Lock()
	conns := n.conns
	n.conns = nil
	n.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (n *memNet) setRefuse(v bool) {
	n.mu.Lock()
	n.refuse = v
	n.mu.Unlock()
}

func (n *memNet) close() {
	n.srv.Close()
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, tr := range n.clients {
		tr.CloseIdleConnections()
	}
}

// memFixture is a hub on a memNet, for synctest tests.
type memFixture struct {
	t      *testing.T
	hub    *Hub
	net    *memNet
	creds  *memCredentials
	envKey string
}

func newMemFixture(t *testing.T, opts HubOptions) *memFixture {
	key, keyHash := NewEnvironmentKey()
	creds := &memCredentials{envKeys: map[string]string{keyHash: "env_1"}, machines: map[string]string{}}
	opts.Credentials = creds
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	h := NewHub(opts)
	return &memFixture{t: t, hub: h, net: newMemNet(h), creds: creds, envKey: key}
}

func (f *memFixture) client(opts executor.Options) *executor.Client {
	opts.URL = "http://reins.test"
	opts.HTTPClient = f.net.httpClient()
	if opts.EnvironmentKey == "" && opts.TokenSource == nil {
		opts.EnvironmentKey = f.envKey
	}
	if opts.Executor.Name == "" {
		opts.Executor.Name = "exec-a"
	}
	if opts.Logger == nil {
		opts.Logger = testLogger(f.t)
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = -1 // the hub pings; see Options.PingInterval
	}
	c := executor.NewClient(opts)
	go c.Run(context.Background())
	return c
}

// shutdown stops clients, drains the hub and closes the network.
func (f *memFixture) shutdown(clients ...*executor.Client) {
	for _, c := range clients {
		c.Stop()
		<-c.Done()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	f.hub.Stop(ctx)
	f.net.close()
}

func (f *memFixture) assign(sessionID string, tools ...string) *Lease {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		ch := f.hub.Changed("env_1")
		l, err := f.hub.Assign(ctx, AssignRequest{EnvironmentID: "env_1", SessionID: sessionID, Tools: tools})
		if err == nil {
			return l
		}
		if !errorsIs(err, ErrNoExecutor) {
			f.t.Fatalf("Assign: %v", err)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			f.t.Fatalf("Assign: %v", err)
		}
	}
}
