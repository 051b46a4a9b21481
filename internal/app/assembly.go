package app

import (
	"cmp"
	"context"
	"fmt"
	"github.com/reinsdev/reins/internal/pricing"
	"net/http"
	"os"
	"path/filepath"

	"github.com/reinsdev/reins/internal/bus"
	"github.com/reinsdev/reins/internal/bus/pgnotify"
	"github.com/reinsdev/reins/internal/console"
	"github.com/reinsdev/reins/internal/deployments"
	"github.com/reinsdev/reins/internal/dreams"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/memories"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/filesource"
	"github.com/reinsdev/reins/internal/model/gateway"
	"github.com/reinsdev/reins/internal/model/scripted"
	"github.com/reinsdev/reins/internal/packages"
	"github.com/reinsdev/reins/internal/sessions"
	"github.com/reinsdev/reins/internal/store"
	"github.com/reinsdev/reins/internal/store/postgres"
	"github.com/reinsdev/reins/internal/store/sqlite"
	"github.com/reinsdev/reins/internal/toolhost"
	"github.com/reinsdev/reins/internal/toolhost/mcphost"
	"github.com/reinsdev/reins/internal/turntoken"
	"github.com/reinsdev/reins/internal/vault"
	"github.com/reinsdev/reins/internal/webfetch"
	"github.com/reinsdev/reins/internal/webhooks"
	"github.com/reinsdev/reins/internal/workqueue"
	"github.com/reinsdev/reins/sandbox/netguard"
)

// assembly is an App that New's steps are putting together, and what the
// steps hand on to each other. undo closes, last first, what the steps
// opened, when a later one fails.
type assembly struct {
	cfg    Config
	a      *App
	prices *pricing.Table

	undo     []func()
	models   model.Router
	rawKey   []byte // the master key
	keys     *vault.Keyring
	guard    *netguard.Guard // of the server's requests to URLs users give
	observer harness.Observer
	http     httpapi.Config // the API's, filled by the steps
	requests *http.Client   // the server's own requests to URLs users give
	workers  *toolhost.Workers
	hosting  *sessions.Hosting
	runner   replicaRunner
	writer   *sessions.Writer  // the runners' and the API's one write path
	sessions *sessions.Service // the API's and the dreams' sessions service
	relay    *pgnotify.Relay   // the wake-ups' across processes (PostgreSQL only)
}

// undoAll closes what the steps opened.
func (as *assembly) undoAll() {
	for i := len(as.undo) - 1; i >= 0; i-- {
		as.undo[i]()
	}
}

// lockDir creates and locks the data dir. It holds sandboxes, workspaces
// and CA files even when the store is in PostgreSQL, so it is locked
// either way.
func (as *assembly) lockDir(context.Context) error {
	if err := os.MkdirAll(as.cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	lock, err := as.cfg.DataDirLock.take(as.cfg.DataDir)
	if err != nil {
		return err
	}
	as.a.lock = lock
	as.undo = append(as.undo, func() { lock.release() })
	return nil
}

// openStore opens PostgreSQL when a database URL is given, else the SQLite
// file in the data dir.
func (as *assembly) openStore(ctx context.Context) error {
	var st store.Store
	var err error
	if as.cfg.DatabaseURL != "" {
		st, err = postgres.Open(ctx, as.cfg.DatabaseURL)
	} else {
		st, err = sqlite.Open(ctx, filepath.Join(as.cfg.DataDir, DBFile), as.cfg.SQLite...)
	}
	if err != nil {
		return err
	}
	as.a.Store = st
	as.undo = append(as.undo, func() { st.Close() })
	return nil
}

// openModels bounds the configured model providers, adding "scripted"
// when it is missing.
func (as *assembly) openModels(context.Context) error {
	as.models = model.Router{}
	for k, v := range as.cfg.Models {
		as.models[k] = v
	}
	if as.models["scripted"] == nil {
		as.models["scripted"] = &scripted.Provider{Dir: filepath.Join(as.cfg.DataDir, "scripts")}
	}
	limitModels(as.models, as.cfg.ModelConcurrency, as.cfg.ProviderConcurrency)
	return nil
}

// openKeys loads the master key, checks it is the database's, and makes
// the turn tokens' issuer under it.
func (as *assembly) openKeys(ctx context.Context) error {
	rawKey := as.cfg.MasterKey
	if rawKey == nil {
		var err error
		if rawKey, err = vault.LoadKey(os.Getenv(vault.EnvKey), as.cfg.DataDir); err != nil {
			return err
		}
	}
	keys, err := vault.NewKeyring(rawKey)
	if err != nil {
		return err
	}
	if err := sameMasterKey(ctx, as.a.Store, keys); err != nil {
		return err
	}
	as.rawKey, as.keys = rawKey, keys
	as.a.TurnTokens, err = turntoken.New(rawKey, as.cfg.TurnTokenTTL)
	return err
}

// openReplicas makes the bus and, when replicas may share the database
// (PostgreSQL), names this replica and opens the relay that carries
// wake-ups across processes.
func (as *assembly) openReplicas(ctx context.Context) error {
	as.a.Bus = bus.New()
	if as.cfg.DatabaseURL == "" {
		return nil
	}
	if as.cfg.ReplicaID == "" {
		as.cfg.ReplicaID = replicaName()
	}
	as.cfg.Logger = as.cfg.Logger.With("replica", as.cfg.ReplicaID)
	relay, err := openRelay(ctx, as.cfg.DatabaseURL, as.cfg.ReplicaID, as.a.Bus, as.cfg.Logger)
	if err != nil {
		return err
	}
	as.relay = relay
	as.undo = append(as.undo, func() { relay.Close() })
	return nil
}

// openTelemetry sets up the traces and the harness's observer.
func (as *assembly) openTelemetry(ctx context.Context) error {
	instance := cmp.Or(as.cfg.ReplicaID, replicaName())
	tracing, observer, err := openTelemetry(ctx, as.cfg, instance)
	if err != nil {
		return err
	}
	if tracing != nil {
		as.undo = append(as.undo, func() { tracing.Stop(context.Background()) })
	}
	as.a.tracing, as.observer = tracing, observer
	return nil
}

// toolHost makes the executor hub and the tool host around it.
func (as *assembly) toolHost(context.Context) error {
	cfg := as.cfg
	hubOpts := cfg.Hub
	if hubOpts.Logger == nil {
		hubOpts.Logger = cfg.Logger
	}
	as.a.Hub = toolhost.NewHub(hubOpts, as.a.Store)
	as.http = cfg.HTTP
	if as.http.FileSpoolDir == "" {
		// Uploads cut off by a crash are left here; nothing else is.
		as.http.FileSpoolDir = filepath.Join(cfg.DataDir, "uploads")
		os.RemoveAll(as.http.FileSpoolDir)
	}
	tc := toolhost.Config{Hub: as.a.Hub, Store: as.a.Store, Keys: as.keys, DataDir: cfg.DataDir, Sandbox: cfg.Sandbox, Packages: cfg.Packages,
		Outputs: &toolhost.OutputsConfig{SpoolDir: as.http.FileSpoolDir, MaxSize: cmp.Or(as.http.MaxFileSize, httpapi.DefaultMaxFileSize),
			Save: httpapi.StoreOutput},
		Logger: cfg.Logger}
	if cfg.DatabaseURL != "" {
		ttl := cfg.LeaseTTL
		if ttl <= 0 {
			ttl = harness.DefaultLeaseTTL
		}
		tc.Replicas = &toolhost.ReplicaConfig{ID: cfg.ReplicaID, TTL: ttl, Bus: as.a.Bus}
	}
	var err error
	as.a.tools, err = toolhost.New(tc)
	return err
}

// harness makes the harness, with the tool host, the MCP servers' pools
// and web_fetch behind one guard of the server's own requests.
func (as *assembly) harness(context.Context) error {
	cfg, a := as.cfg, as.a
	as.writer = sessions.NewWriter(a.Store)
	if as.prices = cfg.Prices; as.prices == nil {
		as.prices = pricing.Default()
	}
	hcfg := harness.Config{Prices: as.prices, Store: a.Store, Writer: as.writer, Bus: a.Bus, Model: filesource.New(as.models, a.Store), Retry: cfg.Retry, IdleLinger: cfg.IdleLinger,
		MaxToolRounds: cfg.MaxToolRounds, MaxCompactions: cfg.MaxCompactions, ContextWindow: cfg.ContextWindow, Logger: cfg.Logger, Observer: as.observer}
	if cfg.DatabaseURL != "" {
		// Replicas may share the database: sessions run under leases.
		hcfg.Leases, hcfg.Owner, hcfg.LeaseTTL = a.Store, cfg.ReplicaID, cfg.LeaseTTL
	}
	hcfg.Tools = cfg.Tools
	if hcfg.Tools == nil {
		hcfg.Tools = a.tools
	}
	as.hosting = sessions.NewHosting(a.Store)
	as.workers = &toolhost.Workers{Store: a.Store, Placed: a.tools.Placed, Hosting: as.hosting}
	// Every request to a URL a user gave passes one guard.
	guard := &netguard.Guard{Allow: cfg.OutboundAllow, Hint: outboundAllowHint}
	as.guard = guard
	streams, requests := guard.Client(0), guard.Client(outboundTimeout)
	as.requests = requests
	a.idle = func() {
		streams.CloseIdleConnections()
		requests.CloseIdleConnections()
	}
	hcfg.Workers, hcfg.Credentials = as.workers, toolhost.NewCredentialCheck(a.Store)
	hcfg.MCP = mcphost.New(a.Store, as.keys, streams, requests, cfg.Logger)
	hcfg.AgentEnds = a.tools.AgentEnds(a.TurnTokens, as.models)
	hcfg.Skills = a.tools.SkillPrompts()
	hcfg.Outcomes = harness.OutcomeConfig{GraderModel: cfg.GraderModel, Heartbeat: cfg.OutcomeHeartbeat, Outputs: a.Store}
	hcfg.WebFetch = &webfetch.Fetcher{Transport: guard.Transport(), Policy: toolhost.WebFetchPolicy(a.Store)}
	a.Harness = harness.New(hcfg)
	if as.relay != nil {
		a.relay = &replicaRelay{relay: as.relay, previews: newPreviewRelay(as.relay, a.Harness.Previews(), cfg.Logger), bus: a.Bus, h: a.Harness,
			tools: a.tools, lag: a.notifyLag(), log: cfg.Logger}
	}
	return nil
}

// workQueue makes the pull workers' work queue.
func (as *assembly) workQueue(context.Context) error {
	a := as.a
	as.runner = replicaRunner{a.Harness, a.Bus}
	as.workers.Runner = as.runner
	a.Work = workqueue.New(a.Store, a.Bus, as.workers, as.cfg.Logger)
	as.workers.Queue = a.Work
	a.tools.SetWork(a.Work)
	if as.cfg.WorkLeaseTTL > 0 {
		a.Work.TTL = as.cfg.WorkLeaseTTL
	}
	return nil
}

// dreams makes the sessions service and the runner of dreams, which
// creates sessions through it.
func (as *assembly) dreams(context.Context) error {
	a := as.a
	as.sessions = sessions.New(sessions.Config{Store: a.Store, Bus: a.Bus, Runner: as.runner, Work: a.Work, Hosting: as.hosting, Writer: as.writer,
		Prices: as.prices, GraderModel: as.cfg.GraderModel})
	a.dreams = dreams.New(dreams.Config{Store: a.Store, Sessions: as.sessions, Bus: a.Bus, Owner: as.cfg.ReplicaID,
		MaxDuration: as.cfg.DreamMaxDuration, Logger: as.cfg.Logger})
	return nil
}

// api makes the HTTP API, its streams and requests bounded by the
// open-file limit.
func (as *assembly) api(context.Context) error {
	cfg, a, hc := as.cfg, as.a, &as.http
	hc.Store, hc.Bus, hc.Harness, hc.Logger, hc.Executors, hc.Work = a.Store, a.Bus, a.Harness, cfg.Logger, a.Hub, a.Work
	hc.Sessions, hc.Dreams = as.sessions, a.dreams
	runs := &deployments.Runs{Store: a.Store}
	a.deployments = deployments.NewScheduler(deployments.Config{Runs: runs, Now: cfg.DeploymentClock, Poll: cfg.DeploymentPoll, Logger: cfg.Logger})
	hc.Deployments = a.deployments
	hc.Vaults = httpapi.VaultConfig{Store: a.Store, Keyring: as.keys, ProbeClient: as.requests}
	hc.Webhooks = httpapi.WebhookConfig{Store: a.Store, AllowHTTP: cfg.Webhooks.AllowHTTP}
	hc.Auth = &httpapi.Authenticator{Keys: a.Store, EnvironmentKeys: a.Store, SessionTokens: a.Store, Machines: a.Store, Bootstrap: cfg.BootstrapKey}
	hc.Lifecycle = replicaLifecycle{a.tools, a.Bus}
	hc.ValidatePackages = packages.Validate
	hc.Models = as.models
	hc.ExecutorList = a.tools
	hc.Gateway = gateway.New(gateway.Config{Models: as.models, Turns: toolhost.GatewayTurns(a.TurnTokens, a.Harness), Logger: cfg.Logger})
	hc.TurnTokens = a.TurnTokens
	a.files = budgetOf(cmp.Or(cfg.OpenFiles, openFileLimit(), defaultOpenFiles))
	a.files.fit(hc, cfg.Logger)
	a.API = httpapi.New(*hc)
	runs.Launcher = a.API
	return nil
}

// finish completes the App: its logger, the forwarding of agent-end
// turns' calls (replicas), the HTTP server, the order of its services
// (see App.sequence) and the metrics.
func (as *assembly) finish() *App {
	a := as.a
	a.log = as.cfg.Logger
	a.pruner = &memories.Pruner{Store: a.Store, Retention: as.cfg.MemoryVersionRetention, Logger: a.log}
	wh := as.cfg.Webhooks
	wh.Store, wh.Keys, wh.Guard, wh.Logger = a.Store, as.keys, as.guard, a.log
	if as.cfg.Metrics != nil {
		wh.Metrics = as.cfg.Metrics.Registerer()
	}
	a.webhooks = webhooks.New(wh)
	handler := console.Mount(a.API)
	if as.cfg.DatabaseURL != "" {
		a.forward = toolhost.NewForwarder(toolhost.ForwarderConfig{Tokens: a.TurnTokens, Turns: a.Harness, Store: a.Store,
			Replica: as.cfg.ReplicaID, Logger: as.cfg.Logger})
		handler = a.forward.Wrap(handler)
	}
	a.http = newHTTPServer(handler, a.log)
	a.sequence()
	a.watch(as.cfg.Metrics)
	return a
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
