// Package app assembles a reins server: store, bus, harness and HTTP API.
// cmd/reins uses it, and so do tests that need a real server.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/bus/pgnotify"
	"github.com/reinsdev/reins/internal/console"
	"github.com/reinsdev/reins/internal/executorhub"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/gateway"
	"github.com/reinsdev/reins/internal/model/scripted"
	"github.com/reinsdev/reins/internal/packages"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/telemetry"
	"github.com/reinsdev/reins/internal/tool"
	"github.com/reinsdev/reins/internal/turntoken"
	"github.com/reinsdev/reins/internal/vault"
	"github.com/reinsdev/reins/internal/webfetch"
	"github.com/reinsdev/reins/internal/workqueue"
	"github.com/reinsdev/reins/sandbox/netguard"
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
	// IdleLinger and ContextWindow: see harness.Config.
	IdleLinger    time.Duration
	ContextWindow func(modelID string) int
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
	Sandbox SandboxConfig
	// Packages configures the installs of cloud environments' packages.
	Packages PackagesConfig
	// OutboundAllow are internal addresses (loopback, private, link-local)
	// that the server's own requests to URLs users give (agents' MCP
	// servers, credentials' OAuth token endpoints, mcp_oauth_validate) may
	// reach anyway, e.g. an MCP server on 127.0.0.1. Public addresses need
	// no entry.
	OutboundAllow []netip.Prefix
	// Metrics, if set, get the server's metrics (the caller serves their
	// Handler); Tracing, if set, sends traces over OTLP/HTTP. Both are off
	// by default.
	Metrics *telemetry.Metrics
	Tracing *telemetry.TracingConfig
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
	// TurnTokens issues and verifies the model and tools tokens of
	// agent-end turns (under the master key: every replica verifies).
	TurnTokens *turntoken.Issuer
	tools      *hubTools
	idle       func() // closes the idle connections of the outbound clients
	log        *slog.Logger
	srv        *http.Server
	lock       *dirLock // the data dir's, held until Shutdown
	// relay carries wake-ups and previews to the other replicas
	// (PostgreSQL only); relayCtx ends at Shutdown, and relayWG waits for
	// what the relay's notes started.
	relay       *pgnotify.Relay
	previews    *previewRelay
	relayCtx    context.Context
	relayCancel context.CancelFunc
	relayWG     sync.WaitGroup
	metrics     *telemetry.Metrics
	tracing     *telemetry.Tracing
	// files is how the open-file limit is divided (the listener's bound).
	files fdBudget
	// forward sends the calls of agent-end turns running on other
	// replicas there (replicas only); advertise is Config.AdvertiseURL.
	forward   *turnForwarder
	advertise string
}

// DBFile is the database file name inside the data dir.
const DBFile = "reins.db"

// openStore opens PostgreSQL when a database URL is given, else the SQLite
// file in the data dir.
func openStore(ctx context.Context, cfg Config) (store.Store, error) {
	if cfg.DatabaseURL != "" {
		return postgres.Open(ctx, cfg.DatabaseURL)
	}
	return sqlite.Open(ctx, filepath.Join(cfg.DataDir, DBFile), cfg.SQLite...)
}

// New locks the data dir, opens the store and assembles the server. It
// does not start anything; call Start. One App owns a data dir at a time:
// while one holds it (in any process), New fails at once with
// ErrDataDirInUse. The lock is kept until Shutdown or the process's end.
func New(ctx context.Context, cfg Config) (_ *App, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	// The data dir holds sandboxes, workspaces and CA files even when the
	// store is in PostgreSQL, so it is locked either way.
	lock, err := cfg.DataDirLock.take(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			lock.release()
		}
	}()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	models := model.Router{}
	for k, v := range cfg.Models {
		models[k] = v
	}
	if models["scripted"] == nil {
		models["scripted"] = &scripted.Provider{Dir: filepath.Join(cfg.DataDir, "scripts")}
	}
	limitModels(models, cfg.ModelConcurrency, cfg.ProviderConcurrency)
	rawKey := cfg.MasterKey
	if rawKey == nil {
		rawKey, err = vault.LoadKey(os.Getenv(vault.EnvKey), cfg.DataDir)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	keys, err := vault.NewKeyring(rawKey)
	if err == nil {
		err = sameMasterKey(ctx, st, keys)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	b := bus.New()
	hcfg := harness.Config{Store: st, Bus: b, Model: fileSources{next: models, files: st}, Retry: cfg.Retry, IdleLinger: cfg.IdleLinger, ContextWindow: cfg.ContextWindow, Logger: cfg.Logger}
	var relay *pgnotify.Relay
	if cfg.DatabaseURL != "" {
		// Replicas may share the database: sessions run under leases and
		// wake-ups cross processes.
		if cfg.ReplicaID == "" {
			cfg.ReplicaID = replicaName()
		}
		cfg.Logger = cfg.Logger.With("replica", cfg.ReplicaID)
		if relay, err = openRelay(ctx, cfg.DatabaseURL, cfg.ReplicaID, b, cfg.Logger); err != nil {
			st.Close()
			return nil, err
		}
		defer func() {
			if err != nil {
				relay.Close()
			}
		}()
		hcfg.Leases, hcfg.Owner, hcfg.LeaseTTL, hcfg.Logger = st, cfg.ReplicaID, cfg.LeaseTTL, cfg.Logger
	}
	instance := cfg.ReplicaID
	if instance == "" {
		instance = replicaName()
	}
	tracing, observer, err := openTelemetry(ctx, cfg, instance)
	if err != nil {
		st.Close()
		return nil, err
	}
	defer func() {
		if err != nil && tracing != nil {
			tracing.Shutdown(context.Background())
		}
	}()
	hcfg.Observer = observer
	hubOpts := cfg.Hub
	hubOpts.Credentials = credentials{st}
	hubOpts.AllowRegistration = chainRegistration(credentials{st}.allowRegistration, cfg.Hub.AllowRegistration)
	if hubOpts.Logger == nil {
		hubOpts.Logger = cfg.Logger
	}
	hub := executorhub.NewHub(hubOpts)
	ht := newHubTools(hub, st, keys, filepath.Join(cfg.DataDir, "workspaces"), cfg.Logger)
	ht.sandboxes, err = newSandboxes(ht.ctx, cfg.Sandbox, cfg.Packages, st, keys, cfg.DataDir, cfg.Logger)
	if err != nil {
		st.Close()
		return nil, err
	}
	if cfg.DatabaseURL != "" {
		ttl := cfg.LeaseTTL
		if ttl <= 0 {
			ttl = harness.DefaultLeaseTTL
		}
		ht.hands = &replicaHands{st: st, bus: b, hub: hub, replica: cfg.ReplicaID, ttl: ttl, log: cfg.Logger}
	}
	slots, how := cfg.Sandbox.slots()
	ht.slots = newCapacity(slots, ht.yield)
	cfg.Logger.Info("cloud sessions' tools run in at most this many sessions at once", "slots", slots, "from", how)
	tools := cfg.Tools
	if tools == nil {
		tools = ht
	}
	wk := &workers{st: st, placed: ht.placed, hosting: sessions.NewHosting(st)}
	// Every request to a URL a user gave passes one guard.
	guard := &netguard.Guard{Allow: cfg.OutboundAllow, Hint: outboundAllowHint}
	streams, requests := guard.Client(0), guard.Client(outboundTimeout)
	mcpHost := newMCPHost(st, keys, streams, requests, cfg.Logger)
	hcfg.Tools, hcfg.Workers, hcfg.MCP, hcfg.Credentials = tools, wk, mcpHost, credentialCheck{st}
	turnTokens, err := turntoken.New(rawKey, cfg.TurnTokenTTL)
	if err != nil {
		st.Close()
		return nil, err
	}
	hcfg.AgentEnds = agentEnds{hub: hub, st: st, tokens: turnTokens, models: models, hands: ht.hands}
	hcfg.Skills = skillPrompts{st: st, sandboxed: ht.sandboxes != nil}
	hcfg.WebFetch = &webfetch.Fetcher{Transport: guard.Transport(), Policy: webFetchPolicy(st)}
	h := harness.New(hcfg)
	var previews *previewRelay
	if relay != nil {
		previews = newPreviewRelay(relay, h.Previews(), cfg.Logger)
	}
	wk.h = replicaRunner{h, b}
	wk.q = workqueue.New(st, b, wk, cfg.Logger)
	ht.work = wk.q
	if cfg.WorkLeaseTTL > 0 {
		wk.q.TTL = cfg.WorkLeaseTTL
	}
	hc := cfg.HTTP
	hc.Store, hc.Bus, hc.Harness, hc.Logger, hc.Executors, hc.Work = st, b, h, cfg.Logger, hub, wk.q
	hc.Sessions = sessions.New(sessions.Config{Store: st, Bus: b, Runner: wk.h, Work: wk.q, Hosting: wk.hosting})
	hc.Auth = &httpapi.Authenticator{Keys: st, EnvironmentKeys: st, Machines: st, Bootstrap: cfg.BootstrapKey}
	hc.Vaults = httpapi.VaultConfig{Keyring: keys, ProbeClient: requests}
	hc.Lifecycle = replicaLifecycle{ht, b}
	hc.ValidatePackages = packages.Validate
	hc.Models = models
	hc.ExecutorList = executorList{hub}
	hc.Gateway = gateway.New(gateway.Config{Models: models, Turns: gatewayTurns{tokens: turnTokens, h: h}, Logger: cfg.Logger})
	hc.TurnTokens = turnTokens

	if hc.FileSpoolDir == "" {
		// Uploads cut off by a crash are left here; nothing else is.
		hc.FileSpoolDir = filepath.Join(cfg.DataDir, "uploads")
		os.RemoveAll(hc.FileSpoolDir)
	}
	ht.outputs = newOutputs(st, hc.FileSpoolDir, cmp.Or(hc.MaxFileSize, httpapi.DefaultMaxFileSize), cfg.Logger)
	files := budgetOf(cmp.Or(cfg.OpenFiles, openFileLimit(), defaultOpenFiles))
	files.fit(&hc, cfg.Logger)
	api := httpapi.New(hc)
	idle := func() {
		streams.CloseIdleConnections()
		requests.CloseIdleConnections()
	}
	rctx, rcancel := context.WithCancel(context.Background())
	a := &App{Store: st, Bus: b, Harness: h, API: api, Hub: hub, Work: wk.q, TurnTokens: turnTokens, tools: ht, idle: idle, log: cfg.Logger, lock: lock,
		relay: relay, previews: previews, relayCtx: rctx, relayCancel: rcancel, metrics: cfg.Metrics, tracing: tracing, files: files, advertise: cfg.AdvertiseURL}
	if cfg.DatabaseURL != "" {
		a.forward = &turnForwarder{tokens: turnTokens, h: h, st: st, replica: cfg.ReplicaID, log: cfg.Logger,
			client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}}
	}
	a.watch(cfg.Metrics)
	return a, nil
}

// Start resumes interrupted sessions and serves the API on ln until
// Shutdown. It returns at once; serving errors are logged.
func (a *App) Start(ctx context.Context, ln net.Listener) error {
	if a.tools.sandboxes != nil {
		a.tools.sandboxes.check(ctx)
	} else {
		a.log.Warn("--sandbox=none: cloud sessions' tools run on this host as the server's user, confined by Landlock only; they can read the server's files and reach its network. Use this only on a trusted single-user machine.")
	}
	a.tools.sweepWorkspaces(ctx)
	// Listening starts before the harness looks for work, so that no
	// wake-up falls between the two.
	if err := a.startRelay(ctx); err != nil {
		return fmt.Errorf("wake-ups from other replicas: %w", err)
	}
	handler := console.Mount(a.API)
	if a.forward != nil {
		a.tools.hands.url = advertiseURL(a.advertise, ln)
		handler = a.forward.wrap(handler)
	}
	a.tools.startHands()
	if err := a.Harness.Start(ctx); err != nil {
		return fmt.Errorf("resume sessions: %w", err)
	}
	a.Work.Start(time.Second)
	// No ReadTimeout: the API bounds the time a request body takes
	// itself (httpapi.Config.BodyTimeout), answering a 408 in its error
	// envelope, and leaves requests without a body alone.
	a.srv = &http.Server{Handler: logRequests(handler, a.log), ReadHeaderTimeout: readHeaderTimeout, IdleTimeout: idleTimeout,
		ErrorLog: slog.NewLogLogger(a.log.Handler(), slog.LevelWarn)}
	ln = newBoundedListener(ln, a.files.connections)
	go func() {
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("http server stopped", "err", err)
		}
	}()
	return nil
}

// Shutdown ends streams cleanly, stops session runners at a safe point
// (with replicas, each first finishes its step and hands its session over:
// the wake-ups it sends are flushed when the relay closes, last), drains
// executors (close code 4005: they reconnect to the next
// server), stops accepting requests, closes the store and releases the
// data dir.
func (a *App) Shutdown(ctx context.Context) error {
	a.API.Shutdown()
	a.Work.Shutdown()
	a.tools.leave(ctx)
	var errs []error
	if err := a.Harness.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("harness: %w", err))
	}
	a.tools.stop()
	if err := a.Hub.Shutdown(ctx); err != nil {
		errs = append(errs, fmt.Errorf("executor hub: %w", err))
	}
	if a.srv != nil {
		if err := a.srv.Shutdown(ctx); err != nil {
			a.srv.Close() // cut what is left rather than hang
			errs = append(errs, fmt.Errorf("http: %w", err))
		}
	}
	// The relay closes after the last request: the wake-ups of the
	// sessions handed over, and of input accepted meanwhile, go out.
	a.stopRelay()
	a.idle()
	errs = append(errs, a.stopTracing(ctx))
	errs = append(errs, a.Store.Close())
	errs = append(errs, a.lock.release())
	return errors.Join(errs...)
}

// limitModels bounds the concurrent calls of each provider of models to
// its own bound and to the shared bound global.
func limitModels(models model.Router, global int, perProvider map[string]int) {
	all := model.NewLimiter(global)
	for name, p := range models {
		own := model.NewLimiter(perProvider[name])
		if own != nil || all != nil {
			models[name] = model.Limit(p, own, all)
		}
	}
}

// sameMasterKey checks that keys seals under the master key the database's
// vault secrets are sealed under, recording its id (not the key) at the
// first start. A replica started with another REINS_MASTER_KEY, or a data
// dir whose master-key file was lost and regenerated, would seal secrets
// the others cannot open and fail to open theirs: it does not start.
func sameMasterKey(ctx context.Context, st store.Store, keys *vault.Keyring) error {
	id, err := st.ClaimSetting(ctx, "vault_key_id", keys.KeyID())
	if err != nil {
		return fmt.Errorf("record the master key's id: %w", err)
	}
	if id != keys.KeyID() {
		return fmt.Errorf("this process's master key (id %s, from %s or <data-dir>/%s) is not the one this database's vault secrets are sealed under (id %s): start every process on this database with the same %s. If that key is lost, the credentials sealed under it cannot be opened by any key: delete the row vault_key_id from the database's settings table to start with this key, then recreate the credentials", keys.KeyID(), vault.EnvKey, vault.KeyFile, id, vault.EnvKey)
	}
	return nil
}
