// Package app assembles a reins server: store, bus, harness and HTTP API.
// cmd/reins uses it, and so do tests that need a real server.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"github.com/reinsdev/reins/internal/pricing"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/deployments"
	"github.com/reinsdev/reins/internal/dreams"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/memories"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/service"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/telemetry"
	"github.com/reinsdev/reins/internal/tool"
	"github.com/reinsdev/reins/internal/toolhost"
	"github.com/reinsdev/reins/internal/turntoken"
	"github.com/reinsdev/reins/internal/webhooks"
	"github.com/reinsdev/reins/internal/workqueue"
)

// Config configures an App.
type Config struct {
	// DataDir holds the database, the generated API key file and named
	// model scripts. Created with mode 0700 if missing.
	DataDir string
	// DatabaseURL, if set (postgres://…), keeps the store in PostgreSQL
	// instead of the SQLite file in DataDir.
	DatabaseURL string
	// SQLite tunes the SQLite store (benchmarks); unused with DatabaseURL.
	SQLite []sqlite.Option
	// ReplicaID names this process among the replicas of a PostgreSQL
	// database (default: host, pid and a random suffix); LeaseTTL is the
	// lease of the sessions it runs (default harness.DefaultLeaseTTL).
	// Unused with SQLite.
	ReplicaID string
	LeaseTTL  time.Duration
	// AdvertiseURL is the base URL the other replicas reach this one at
	// (default http:// and the listener's address; the host's name when it
	// listens on all addresses). A replica forwards there the model
	// gateway and tools calls of the agent-end turns this one runs.
	AdvertiseURL string
	// BootstrapKey is accepted as an API key (REINS_API_KEY).
	BootstrapKey string
	// MasterKey, if set, is the 32-byte master key vault secrets are
	// sealed under; else REINS_MASTER_KEY, else <DataDir>/master-key
	// (generated at the first start). Every process on one database must
	// have the same: New refuses to start otherwise.
	MasterKey []byte
	// Models are the model providers by name ("anthropic", "openai",
	// "scripted"). "scripted" is added when missing.
	Models model.Router
	// ModelConcurrency bounds the model calls in flight across all
	// providers, and ProviderConcurrency those of each provider by name
	// (0 or missing: no bound). Turns over a bound wait, still running.
	ModelConcurrency    int
	ProviderConcurrency map[string]int
	Retry               harness.RetryPolicy
	// TurnTokenTTL is the lifetime of the model and tools tokens of
	// agent-end turns (0: turntoken's default).
	TurnTokenTTL time.Duration
	// WorkLeaseTTL is the lease of a pull worker's work item (default
	// 30 s).
	WorkLeaseTTL time.Duration
	// MemoryVersionRetention is how long memories' older versions are
	// kept (0: memories.DefaultRetention, 30 days; a memory's latest
	// version is kept as long as the memory).
	MemoryVersionRetention time.Duration
	// MaxToolRounds bounds the tool-use rounds of a turn (see
	// harness.Config; 0: no limit).
	MaxToolRounds int
	// MaxCompactions bounds the compactions in a row without progress
	// (see harness.Config; 0: no limit).
	MaxCompactions int
	// IdleLinger and ContextWindow: see harness.Config.
	IdleLinger    time.Duration
	ContextWindow func(modelID string) int
	// GraderModel is the model of outcomes' graders ("": each session's
	// model); OutcomeHeartbeat the interval of their
	// span.outcome_evaluation_ongoing (0: 5 s). See harness.OutcomeConfig.
	GraderModel      string
	OutcomeHeartbeat time.Duration
	// Prices prices what sessions consume (nil: the built-in prices).
	Prices *pricing.Table
	// DreamMaxDuration bounds the time a dream's session runs: past it,
	// the dream fails with a timeout (0: dreams.DefaultMaxDuration).
	DreamMaxDuration time.Duration
	// DeploymentClock is the clock the scheduler of deployments reads
	// (nil: time.Now); tests shift it to reach an instant sooner.
	DeploymentClock func() time.Time
	// DeploymentPoll is how often the scheduler of deployments reads
	// them without a wake-up (0: deployments.DefaultPoll).
	DeploymentPoll time.Duration
	// Tools replaces the executor hub as the runner of built-in tools
	// (tests).
	Tools tool.Runner
	// Hub tunes the executor hub (lease TTL, heartbeats); Credentials is
	// set by New.
	Hub    executorhub.HubOptions
	Logger *slog.Logger
	// HTTP tunes the API (ping and poll intervals, body limit and
	// timeout, per-key limits). Its MaxStreams and MaxRequests are
	// bounded by the open-file limit: 0 (none) and a value over what the
	// limit allows become that.
	HTTP httpapi.Config
	// OpenFiles, if set, replaces the process's open-file limit in
	// dividing it between connections, streams and requests (tests).
	OpenFiles int
	// Sandbox configures the sandboxes cloud sessions' tools run in.
	Sandbox toolhost.SandboxConfig
	// Packages configures the installs of cloud environments' packages.
	Packages toolhost.PackagesConfig
	// OutboundAllow are internal addresses (loopback, private, link-local)
	// that the server's own requests to URLs users give (agents' MCP
	// servers, credentials' OAuth token endpoints, mcp_oauth_validate) may
	// reach anyway, e.g. an MCP server on 127.0.0.1. Public addresses need
	// no entry.
	OutboundAllow []netip.Prefix
	// Webhooks configures the delivery of webhooks: its options (AllowHTTP,
	// Attempts, backoff, Timeout, Poll, DisableAfter); the server sets its
	// store, keys, guard (OutboundAllow's), metrics and logger.
	Webhooks webhooks.Config
	// Metrics, if set, get the server's metrics (the caller serves their
	// Handler); Tracing, if set, sends traces over OTLP/HTTP. Both are off
	// by default.
	Metrics *telemetry.Metrics
	Tracing *telemetry.TracingConfig
	// TLS, if set, makes Start serve HTTPS (and HTTP/2 when its
	// NextProtos offer h2) on its listener.
	TLS *tls.Config
	// DataDirLock, if set, is the data dir's lock the caller took with
	// LockDataDir; New adopts it instead of taking one.
	DataDirLock *DataDirLock
}

// outboundAllowHint follows a refusal of an internal address by the
// server's own requests.
const outboundAllowHint = "an operator can allow it with --outbound-allow"

// outboundTimeout bounds one request to a token endpoint or one probe of
// mcp_oauth_validate.
const outboundTimeout = 15 * time.Second

// The HTTP server's bounds on a connection: the time a client takes to
// send a request's headers, and the time a kept-alive connection waits
// for the next request.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
)

// App is an assembled server.
type App struct {
	Store   store.Store
	Bus     *bus.Bus
	Harness *harness.Harness
	API     *httpapi.Server
	Hub     *executorhub.Hub
	Work    *workqueue.Service
	// dreams runs the dreams.
	dreams *dreams.Runner
	// deployments fires the deployments' schedules.
	deployments *deployments.Scheduler
	// webhooks delivers the webhooks' outbox.
	webhooks *webhooks.Deliverer
	// TurnTokens issues and verifies the model and tools tokens of
	// agent-end turns (under the master key: every replica verifies).
	TurnTokens *turntoken.Issuer
	tools      *toolhost.Host
	idle       func() // closes the idle connections of the outbound clients
	log        *slog.Logger
	http       *httpServer
	lock       *dirLock // the data dir's, held until Shutdown
	// relay carries wake-ups and previews to the other replicas
	// (PostgreSQL only).
	relay    *replicaRelay
	pruner   *memories.Pruner // memory versions past their retention
	metrics  *telemetry.Metrics
	tracing  *telemetry.Tracing
	services service.Group // what Start starts and Shutdown stops, in order
	// files is how the open-file limit is divided (the listener's bound).
	files fdBudget
	// forward sends the calls of agent-end turns running on other
	// replicas there (replicas only); advertise is Config.AdvertiseURL.
	forward   *toolhost.Forwarder
	advertise string
	// tls is Config.TLS.
	tls *tls.Config
}

// DBFile is the database file name inside the data dir.
const DBFile = "reins.db"

// New locks the data dir, opens the store and assembles the server. It
// does not start anything; call Start. One App owns a data dir at a time:
// while one holds it (in any process), New fails at once with
// ErrDataDirInUse. The lock is kept until Shutdown or the process's end.
func New(ctx context.Context, cfg Config) (_ *App, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	as := &assembly{cfg: cfg, a: &App{metrics: cfg.Metrics, advertise: cfg.AdvertiseURL, tls: cfg.TLS}}
	defer func() {
		if err != nil {
			as.undoAll()
		}
	}()
	steps := []func(context.Context) error{
		as.lockDir, as.openStore, as.openModels, as.openKeys, as.openReplicas, as.openTelemetry,
		as.toolHost, as.harness, as.workQueue, as.dreams, as.api,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return nil, err
		}
	}
	return as.finish(), nil
}

// sequence adds the server's services to a.services in the order Start
// starts them; Shutdown stops them in the reverse order. Each stops after
// the ones that use it: the relay last, after the last request, so that
// the wake-ups of the sessions handed over, and of input accepted
// meanwhile, go out; the HTTP server after the executors drain and the
// runners stop (the requests of the turns that drain are answered); the
// streams first.
func (a *App) sequence() {
	if a.tracing != nil {
		a.services.Add("tracing", a.tracing)
	}
	a.services.Add("outbound clients", service.Hooks{OnStop: func(context.Context) error { a.idle(); return nil }})
	if a.relay != nil {
		a.services.Add("wake-ups from other replicas", a.relay)
	}
	a.services.Add("http", a.http)
	a.services.Add("executor hub", a.Hub)
	a.services.Add("tool host", a.tools)
	a.services.Add("harness", a.Harness)
	// With replicas, this one tells the others it leaves before its
	// runners hand their sessions over.
	a.services.Add("leave", service.Hooks{OnStop: func(ctx context.Context) error { a.tools.Leave(ctx); return nil }})
	a.services.Add("work lease expiry", &workqueue.Expiry{Queue: a.Work})
	a.services.Add("memory version retention", a.pruner)
	a.services.Add("api", a.API)
	a.services.Add("webhook deliveries", a.webhooks)
	// Dreams create and follow sessions: they start last and stop first.
	a.services.Add("dreams", a.dreams)
	// Scheduled deployments create sessions: they start last too.
	a.services.Add("deployment schedules", a.deployments)
}

// Start starts the server's services (see sequence): it checks the
// sandboxes, resumes interrupted sessions and serves the API on ln until
// Shutdown. It returns once they are started; serving errors are logged.
// After an error, call Shutdown.
func (a *App) Start(ctx context.Context, ln net.Listener) error {
	if a.forward != nil {
		a.tools.Announce(toolhost.AdvertiseURL(a.advertise, ln))
	}
	var l net.Listener = newBoundedListener(ln, a.files.connections)
	if a.tls != nil {
		// Over the bound: the bound counts connections, TLS or not.
		l = tls.NewListener(l, a.tls)
	}
	a.http.listen(l)
	if err := a.services.Start(ctx); err != nil {
		return err
	}
	a.http.open()
	return nil
}

// Shutdown stops the server's services in the reverse order of Start
// (started or not), each within ctx: it ends streams cleanly, stops lease
// expiry, stops session runners at a safe point (with replicas, each
// first finishes its step and hands its session over), stops the local
// executors and the package installs in flight, drains executors (close
// code 4005: they reconnect to the next server), stops accepting
// requests, closes the relay (flushing the wake-ups sent) and sends the
// traces left; then it closes the store and releases the data dir. Every
// goroutine the services started has ended when it returns nil.
func (a *App) Shutdown(ctx context.Context) error {
	return errors.Join(a.services.Stop(ctx), a.Store.Close(), a.lock.release())
}
