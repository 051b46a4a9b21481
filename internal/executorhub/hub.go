package executorhub

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/reinsdev/reins/executor"
)

// Credentials checks the long-lived credentials that executors exchange for
// executor tokens. The store implements it. It only ever sees hashes made
// with [HashSecret], so the store keeps no plaintext secret.
//
// A credential that is unknown, revoked or archived is an error wrapping
// [ErrCredentialRejected] (the token endpoint answers 401); any other error
// is answered 503 and the executor retries.
type Credentials interface {
	// VerifyEnvironmentKey returns the environment of the environment key
	// whose hash is keyHash.
	VerifyEnvironmentKey(ctx context.Context, keyHash string) (environmentID string, err error)
	// VerifyMachineToken returns the machine of the machine token whose
	// hash is tokenHash.
	VerifyMachineToken(ctx context.Context, tokenHash string) (machineID string, err error)
}

// Registration describes an executor that asks to register.
type Registration struct {
	// EnvironmentID is set for an environment-scoped executor.
	EnvironmentID string
	// MachineID is set for a machine-scoped executor.
	MachineID    string
	Executor     executor.ExecutorInfo
	Capabilities []string
	MaxSessions  int
	// Local is set for an in-process executor made by [NewLocal]: it
	// connected through the hub's in-memory listener, which nothing
	// outside the process can reach.
	Local bool
}

// Notification is a notification an executor sent about one of its
// sessions: process.exit, terminal.output or terminal.exit.
type Notification struct {
	EnvironmentID string
	SessionID     string
	Method        string
	Params        json.RawMessage
}

// HubOptions configure a [Hub]. Only Credentials is required.
type HubOptions struct {
	// Credentials checks environment keys and machine tokens.
	Credentials Credentials
	// TokenSecret signs executor tokens; hubs that share it accept each
	// other's tokens. Empty means a random secret of this hub.
	TokenSecret []byte
	// TokenTTL is the lifetime of an executor token (default 15 minutes).
	// When it passes, the connection is closed with 4001.
	TokenTTL time.Duration
	// HeartbeatInterval is the heartbeat interval executors are told to
	// use (default 10 s).
	HeartbeatInterval time.Duration
	// LeaseTTL is how long a lease lasts without a heartbeat (default 30 s).
	LeaseTTL time.Duration
	// PingInterval is how often the hub pings each executor connection
	// (default 10 s; negative: never), PingTimeout how long a pong may
	// take (default 5 s). A connection whose pong is late went silent (a
	// network cut that closed nothing): it is closed and its leases are
	// lost at once (tool calls in flight end with ErrToolOutcomeUnknown),
	// instead of at LeaseTTL.
	PingInterval, PingTimeout time.Duration
	// MaxFrameBytes limits one JSON-RPC frame (default 16 MiB).
	MaxFrameBytes int64
	// RequestTimeout bounds requests to executors (default 30 s).
	RequestTimeout time.Duration
	// PublicURL is the base URL (http or https) executors connect to,
	// returned by the token endpoint. Empty means the request's host.
	PublicURL string
	// AllowRegistration, if set, may refuse a registration (for example
	// of an archived environment, or of an outside executor in an
	// environment only local executors serve); the connection is then
	// closed with 4002.
	AllowRegistration func(ctx context.Context, r Registration) error
	// OnNotification, if set, receives process and terminal notifications.
	// It must not block.
	OnNotification func(n Notification)
	// Logger receives the hub's diagnostics (default: discarded).
	Logger *slog.Logger
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Hub is the harness end of the executor protocol. It is an
// [http.Handler] serving the token endpoint (POST …/v1/executor/tokens)
// and the connect endpoint (GET …/v1/executor/connect); it places sessions
// on registered executors under leases and dispatches their tool calls.
type Hub struct {
	opts   HubOptions
	signer tokenSigner
	logger *slog.Logger

	// mu guards the fields below, and the fields of every hubConn,
	// Lease and toolCall marked "guarded by h.mu".
	mu         sync.Mutex
	byIdentity map[string]*hubConn          // registered connections
	byScope    map[string]map[*hubConn]bool // registered connections by scope (environment or machine)
	leases     map[string]*Lease            // active leases by session id
	expired    recent[string]               // ids of the leases that expired lately, by session id
	changed    map[string]chan struct{}     // per environment: closed on change
	conns      map[*hubConn]bool            // every open connection
	draining   bool                         // Stop began: no new connection, registration or lease

	wg    sync.WaitGroup // connection handlers
	local struct {
		once sync.Once
		ln   *memListener
		srv  *http.Server
		done chan struct{}
	}
}

// NewHub returns a hub.
func NewHub(opts HubOptions) *Hub {
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = 15 * time.Minute
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = 10 * time.Second
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 30 * time.Second
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = executor.DefaultMaxFrameBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	secret := opts.TokenSecret
	if len(secret) == 0 {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	return &Hub{
		opts:       opts,
		signer:     tokenSigner{secret: secret},
		logger:     opts.Logger,
		byIdentity: make(map[string]*hubConn),
		byScope:    make(map[string]map[*hubConn]bool),
		leases:     make(map[string]*Lease),
		changed:    make(map[string]chan struct{}),
		conns:      make(map[*hubConn]bool),
	}
}

// Changed returns a channel that is closed at the next change of the
// executors of an environment: a registration, a disconnection or a freed
// session slot. A harness whose [Hub.Assign] failed with [ErrNoExecutor]
// waits on it (taken before the Assign call) and tries again.
func (h *Hub) Changed(environmentID string) <-chan struct{} {
	return h.changedFor(principal{EnvironmentID: environmentID}.scope())
}

// ChangedMachine is [Hub.Changed] for the executors of a machine.
func (h *Hub) ChangedMachine(machineID string) <-chan struct{} {
	return h.changedFor(principal{MachineID: machineID}.scope())
}

func (h *Hub) changedFor(scope string) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	ch := h.changed[scope]
	if ch == nil {
		ch = make(chan struct{})
		h.changed[scope] = ch
	}
	return ch
}

// anyScope is the key of [Hub.Environments]'s change channel: scopes are
// "environment:…" or "machine:…".
const anyScope = "*"

// Environments returns, sorted, the environments that have a registered
// executor which connected from outside the process (not [NewLocal]), and
// a channel closed at the next registration or disconnection of any
// executor. Servers that share a database announce them to each other,
// so that a session moves to the one its executors are connected to.
func (h *Hub) Environments() (ids []string, changed <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, conns := range h.byScope {
		for c := range conns {
			if !c.local && c.principal.EnvironmentID != "" {
				ids = append(ids, c.principal.EnvironmentID)
				break
			}
		}
	}
	slices.Sort(ids)
	ch := h.changed[anyScope]
	if ch == nil {
		ch = make(chan struct{})
		h.changed[anyScope] = ch
	}
	return ids, ch
}

func (h *Hub) broadcastLocked(scope string) {
	if ch := h.changed[scope]; ch != nil {
		close(ch)
		delete(h.changed, scope)
	}
}

// ExecutorStatus describes a registered executor.
type ExecutorStatus struct {
	ID            string
	EnvironmentID string
	MachineID     string
	Executor      executor.ExecutorInfo
	Capabilities  []string
	MaxSessions   int
	Sessions      int
	// SessionIDs are the sessions it holds leases on, sorted.
	SessionIDs []string
}

// Executors lists the registered executors.
func (h *Hub) Executors() []ExecutorStatus {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []ExecutorStatus
	for _, c := range h.byIdentity {
		sessions := make([]string, 0, len(c.leases))
		for id := range c.leases {
			sessions = append(sessions, id)
		}
		slices.Sort(sessions)
		out = append(out, ExecutorStatus{
			ID: c.id, EnvironmentID: c.principal.EnvironmentID, MachineID: c.principal.MachineID,
			Executor: c.info, Capabilities: slices.Clone(c.caps), MaxSessions: c.maxSessions, Sessions: len(c.leases),
			SessionIDs: sessions,
		})
	}
	slices.SortFunc(out, func(a, b ExecutorStatus) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Start does nothing: the hub's goroutines start with the connections it
// serves, and Stop ends them. It makes the Hub a service.
func (h *Hub) Start(context.Context) error { return nil }

// Stop drains the hub: every executor connection is closed with 4005
// (executors reconnect to another node), every lease ends (pending tool
// calls end with [ErrToolOutcomeUnknown]) and Stop waits for the
// connection handlers to return or ctx to end. It may be called more
// than once.
func (h *Hub) Stop(ctx context.Context) error {
	h.mu.Lock()
	h.draining = true
	conns := make([]*hubConn, 0, len(h.conns))
	for c := range h.conns {
		conns = append(conns, c)
	}
	for _, l := range h.leases {
		h.endLeaseLocked(l, leaseLost, fmt.Errorf("%w: the hub shut down", ErrToolOutcomeUnknown), "")
	}
	for scope := range h.changed {
		h.broadcastLocked(scope)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() { c.close(executor.CloseDrained, "drained") })
	}
	wg.Wait()
	h.mu.Lock()
	srv, srvDone := h.local.srv, h.local.done
	h.mu.Unlock()
	if srv != nil {
		srv.Close()
		<-srvDone
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
