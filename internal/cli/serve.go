package cli

import (
	"context"
	"fmt"
	"github.com/reinsdev/reins/internal/pricing"
	"io"
	"log/slog"
	"net"
	neturl "net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/memories"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/model/anthropic"
	"github.com/reinsdev/reins/internal/model/openai"
	"github.com/reinsdev/reins/internal/toolhost"
	"github.com/reinsdev/reins/internal/webhooks"
	"github.com/reinsdev/reins/sandbox/egress"
	"github.com/reinsdev/reins/sandbox/netguard"
)

type serveOptions struct {
	addr, dataDir    string
	databaseURL      string
	replicaID        string
	advertiseURL     string
	leaseTTL         time.Duration
	anthropicKey     string
	anthropicBaseURL string
	openaiKey        string
	openaiBaseURL    string
	maxAttempts      int
	maxToolRounds    int
	maxCompactions   int
	retryBase        time.Duration
	retryMax         time.Duration
	memoryRetention  time.Duration
	modelConcurrency int
	graderModel      string
	priceFile        string
	providerConc     map[string]int
	shutdownGrace    time.Duration
	logLevel         string
	outboundAllow    []string
	webhooks         webhooks.Config
	sandbox          sandboxFlags
	// cleartextCredentials are --egress-cleartext-credentials.
	cleartextCredentials []string
	memoryBudget         string
	processBudget        int
	pipIndexURL          string
	npmRegistry          string
	bodyTimeout          time.Duration
	maxFileSize          int64
	limits               httpapi.KeyLimits
	maxRequests          int
	maxStreams           int
	debugAddr            string
	metricsAddr          string
	otlpEndpoint         string
	tls                  tlsFlags
	logFormat            string
	// flags are the command's flags, for errors that name them.
	flags *pflag.FlagSet
}

func newServeCommand() *cobra.Command { return serveCommand(&serveOptions{}) }

// serveCommand is the serve command; its flags set o.
func serveCommand(o *serveOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the Managed Agents API",
		Long: `Serve the Claude Managed Agents API: point the official Anthropic SDK
(ANTHROPIC_BASE_URL) at it. Everything is kept in an embedded SQLite database
in the data dir; nothing else needs installing.

Every flag falls back to the environment variable named in its description;
a value that is not valid, on the command line or in the environment, is
refused at start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			return runServe(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:4180", "listen address (REINS_ADDR)")
	f.StringVar(&o.dataDir, "data-dir", defaultDataDir(), "data directory (REINS_DATA_DIR)")
	f.StringVar(&o.databaseURL, "database-url", "", "PostgreSQL URL (postgres://…) to keep the store in instead of SQLite in the data dir (REINS_DATABASE_URL); several processes on one database share its sessions by lease, but see the README on what replicas lack yet")
	f.StringVar(&o.replicaID, "replica-id", "", "this process's name among those on one PostgreSQL database, without spaces (default host-pid-random) (REINS_REPLICA_ID)")
	f.StringVar(&o.advertiseURL, "advertise-url", "", "with --database-url, the base URL the other replicas reach this one at, for the model gateway and tools calls of the agent-end turns it runs (default http:// and the listen address, the host's name for an unspecified one) (REINS_ADVERTISE_URL)")
	f.DurationVar(&o.leaseTTL, "lease-ttl", harness.DefaultLeaseTTL, "with --database-url, how long a process that stops renewing keeps its sessions before another takes them over (REINS_LEASE_TTL)")
	f.StringVar(&o.anthropicKey, "anthropic-api-key", "", "Anthropic API key for claude-* models (ANTHROPIC_API_KEY)")
	f.StringVar(&o.anthropicBaseURL, "anthropic-base-url", "", "Messages API base URL (ANTHROPIC_BASE_URL)")
	f.StringVar(&o.openaiKey, "openai-api-key", "", "API key for openai/* models (OPENAI_API_KEY)")
	f.StringVar(&o.openaiBaseURL, "openai-base-url", "", "Chat Completions base URL for openai/* models (OPENAI_BASE_URL)")
	f.IntVar(&o.maxAttempts, "model-max-attempts", 4, "tries of one model call before the turn is abandoned (REINS_MODEL_MAX_ATTEMPTS)")
	f.IntVar(&o.maxToolRounds, "max-tool-rounds", 200, "tool-use rounds a turn may take before it ends with tool_use_limit_reached_error; 0 for no limit (REINS_MAX_TOOL_ROUNDS)")
	f.IntVar(&o.maxCompactions, "max-compactions", 3, "compactions of a thread's context in a row, without a model message or tool call between them, before the turn ends with compaction_limit_reached_error; 0 for no limit (REINS_MAX_COMPACTIONS)")
	f.DurationVar(&o.retryBase, "model-retry-base", time.Second, "first retry delay, doubled each retry (REINS_MODEL_RETRY_BASE)")
	f.DurationVar(&o.retryMax, "model-retry-max", 30*time.Second, "longest retry delay (REINS_MODEL_RETRY_MAX)")
	f.IntVar(&o.modelConcurrency, "model-concurrency", 64, "model calls in flight at once across all providers, 0 for no bound; turns over it wait, still running (REINS_MODEL_CONCURRENCY)")
	f.StringVar(&o.priceFile, "price-file", "", "JSON file of list prices (models, runtime_per_hour, web_search_per_1000) applied over the built-in ones, for usage list costs and budgets; see docs/usage.md (REINS_PRICE_FILE)")
	f.StringVar(&o.graderModel, "grader-model", "", "model id of the grader of outcomes (user.define_outcome), e.g. claude-sonnet-5-5; default each session's own model (REINS_GRADER_MODEL)")
	f.StringToIntVar(&o.providerConc, "model-provider-concurrency", map[string]int{}, "model calls in flight at once per provider, as anthropic=N,openai=N (REINS_MODEL_PROVIDER_CONCURRENCY)")
	f.DurationVar(&o.memoryRetention, "memory-version-retention", memories.DefaultRetention, "how long memories' older versions are kept; a memory's latest version is kept as long as the memory (REINS_MEMORY_VERSION_RETENTION)")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 10*time.Second, "how long shutdown waits for requests and runners; with --database-url, its first half lets each runner finish its step and hand its session to another process (REINS_SHUTDOWN_GRACE)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error; debug logs every request and turn step (REINS_LOG_LEVEL)")
	f.StringSliceVar(&o.outboundAllow, "outbound-allow", nil,
		"internal addresses (CIDR or IP: loopback, private, link-local) that the server's own requests to URLs users give (agents' MCP servers, OAuth token endpoints, mcp_oauth_validate) may reach anyway; refused by default (REINS_OUTBOUND_ALLOW)")
	registerWebhookFlags(f, &o.webhooks)
	o.sandbox.register(f, "cloud sessions'")
	f.StringSliceVar(&o.cleartextCredentials, "egress-cleartext-credentials", nil,
		"hosts (names, IP addresses or *.domain) to which cloud sandboxes' egress proxy substitutes credentials (vault environment_variable credentials, repository tokens) in plain http:// requests too, sending them in clear, e.g. a git server without TLS on a trusted network; elsewhere credentials go over HTTPS only (REINS_EGRESS_CLEARTEXT_CREDENTIALS)")
	f.StringVar(&o.memoryBudget, "sandbox-memory-budget", "",
		"memory all cloud sessions' sandboxes may use together, e.g. 16G (default twice this machine's memory: a sandbox rarely reaches its cap, and sandboxed processes are the first the kernel kills when memory runs out): the tools of budget/--sandbox-memory sessions run at once, more wait in line and idle sessions give their slots up to them (REINS_SANDBOX_MEMORY_BUDGET)")
	f.IntVar(&o.processBudget, "sandbox-process-budget", 0,
		"processes all cloud sessions' sandboxes may run together (default half this machine's thread limit), bounding sessions at once like --sandbox-memory-budget (REINS_SANDBOX_PROCESS_BUDGET)")
	f.StringVar(&o.pipIndexURL, "pip-index-url", "",
		"PyPI simple index (e.g. a mirror, http://host/simple/) that cloud environments' pip packages are installed from instead of pypi.org; installs may reach its host. A mirror on an internal address also needs --egress-allow (REINS_PIP_INDEX_URL)")
	f.StringVar(&o.npmRegistry, "npm-registry", "",
		"npm registry (e.g. a mirror) that cloud environments' npm packages are installed from instead of registry.npmjs.org; installs may reach its host. A mirror on an internal address also needs --egress-allow (REINS_NPM_REGISTRY)")
	f.DurationVar(&o.bodyTimeout, "body-timeout", httpapi.DefaultBodyTimeout,
		"how long a client may take to send a request body; a slower one gets 408 and loses its connection. Responses (streams, long polls) are not bounded (REINS_BODY_TIMEOUT)")
	f.Int64Var(&o.maxFileSize, "max-file-size", httpapi.DefaultMaxFileSize,
		"bytes one upload to /v1/files, or one skill version's files, may hold; a larger one gets 413 (REINS_MAX_FILE_SIZE)")
	f.IntVar(&o.limits.CreatesPerMinute, "creates-per-minute", 0,
		"requests that create a resource (agents, environments, sessions, vaults, credentials, environment keys, files, session resources, skills and skill versions) per minute and key; 0 (the default) for no limit; over it 429 with retry-after (REINS_CREATES_PER_MINUTE)")
	f.IntVar(&o.limits.RequestsPerMinute, "requests-per-minute", 0,
		"other API requests per minute and key; 0 (the default) for no limit; over it 429 with retry-after (REINS_REQUESTS_PER_MINUTE)")
	f.IntVar(&o.maxRequests, "max-requests", 1024,
		"API requests handled at once (event streams and work polls apart), 0 for no bound but the open-file limit's; over it a request waits up to a second, then gets 503 overloaded_error with retry-after. Lowered to what the open-file limit allows (REINS_MAX_REQUESTS)")
	f.IntVar(&o.maxStreams, "max-streams", 0,
		"event streams and work polls open at once, all keys together; 0 (the default) for what the open-file limit allows; over it a stream gets 503 overloaded_error with retry-after (REINS_MAX_STREAMS)")
	f.IntVar(&o.limits.Streams, "streams-per-key", 0, "event streams a key may have open at once; 0 (the default) for no limit per key (REINS_STREAMS_PER_KEY)")
	f.StringVar(&o.debugAddr, "debug-addr", "",
		"address of a separate listener serving the Go runtime's profiles (/debug/pprof/: goroutines, heap, CPU), without authentication; keep it on loopback, e.g. 127.0.0.1:6060. Off by default (REINS_DEBUG_ADDR)")
	f.StringVar(&o.metricsAddr, "metrics-addr", "",
		"address of a separate listener serving /metrics in the Prometheus text format, without authentication, e.g. 127.0.0.1:9090. Off by default (REINS_METRICS_ADDR)")
	f.StringVar(&o.otlpEndpoint, "otlp-endpoint", "",
		"OTLP/HTTP collector that traces are sent to (a turn, its model calls and tool calls), e.g. http://127.0.0.1:4318; OTEL_EXPORTER_OTLP_ENDPOINT also turns them on. Off by default (REINS_OTLP_ENDPOINT)")
	o.tls.register(f)
	registerLogFormat(f, &o.logFormat)
	o.flags = f
	bindEnv(f, []envFallback{
		{"addr", "REINS_ADDR"}, {"data-dir", "REINS_DATA_DIR"}, {"database-url", "REINS_DATABASE_URL"},
		{"replica-id", "REINS_REPLICA_ID"}, {"lease-ttl", "REINS_LEASE_TTL"}, {"advertise-url", "REINS_ADVERTISE_URL"},
		{"anthropic-api-key", "ANTHROPIC_API_KEY"}, {"anthropic-base-url", "ANTHROPIC_BASE_URL"},
		{"openai-api-key", "OPENAI_API_KEY"}, {"openai-base-url", "OPENAI_BASE_URL"},
		{"model-max-attempts", "REINS_MODEL_MAX_ATTEMPTS"}, {"max-tool-rounds", "REINS_MAX_TOOL_ROUNDS"}, {"max-compactions", "REINS_MAX_COMPACTIONS"}, {"model-retry-base", "REINS_MODEL_RETRY_BASE"}, {"model-retry-max", "REINS_MODEL_RETRY_MAX"},
		{"model-concurrency", "REINS_MODEL_CONCURRENCY"}, {"model-provider-concurrency", "REINS_MODEL_PROVIDER_CONCURRENCY"}, {"grader-model", "REINS_GRADER_MODEL"}, {"price-file", "REINS_PRICE_FILE"},
		{"shutdown-grace", "REINS_SHUTDOWN_GRACE"}, {"memory-version-retention", "REINS_MEMORY_VERSION_RETENTION"}, {"log-level", "REINS_LOG_LEVEL"}, {"outbound-allow", "REINS_OUTBOUND_ALLOW"},
		{"egress-cleartext-credentials", "REINS_EGRESS_CLEARTEXT_CREDENTIALS"},
		{"webhook-allow-http", "REINS_WEBHOOK_ALLOW_HTTP"}, {"webhook-attempts", "REINS_WEBHOOK_ATTEMPTS"}, {"webhook-backoff-min", "REINS_WEBHOOK_BACKOFF_MIN"},
		{"webhook-backoff-max", "REINS_WEBHOOK_BACKOFF_MAX"}, {"webhook-timeout", "REINS_WEBHOOK_TIMEOUT"}, {"webhook-poll", "REINS_WEBHOOK_POLL"},
		{"pip-index-url", "REINS_PIP_INDEX_URL"}, {"npm-registry", "REINS_NPM_REGISTRY"},
		{"sandbox-memory-budget", "REINS_SANDBOX_MEMORY_BUDGET"}, {"sandbox-process-budget", "REINS_SANDBOX_PROCESS_BUDGET"},
		{"body-timeout", "REINS_BODY_TIMEOUT"}, {"max-file-size", "REINS_MAX_FILE_SIZE"}, {"creates-per-minute", "REINS_CREATES_PER_MINUTE"},
		{"requests-per-minute", "REINS_REQUESTS_PER_MINUTE"}, {"streams-per-key", "REINS_STREAMS_PER_KEY"}, {"max-requests", "REINS_MAX_REQUESTS"},
		{"max-streams", "REINS_MAX_STREAMS"},
		{"debug-addr", "REINS_DEBUG_ADDR"}, {"metrics-addr", "REINS_METRICS_ADDR"}, {"otlp-endpoint", "REINS_OTLP_ENDPOINT"},
	}...)
	return cmd
}

// check refuses values the flags' types accept but reins does not.
func (o *serveOptions) check() (slog.Level, error) {
	var level slog.Level
	switch o.logLevel {
	case "debug", "info", "warn", "error", "DEBUG", "INFO", "WARN", "ERROR":
		level.UnmarshalText([]byte(o.logLevel))
	default:
		return 0, flagError(o.flags, "log-level", "want debug, info, warn or error, got %q", o.logLevel)
	}
	switch {
	case o.leaseTTL < time.Second:
		return 0, flagError(o.flags, "lease-ttl", "want at least 1s, got %s", o.leaseTTL)
	case strings.ContainsAny(o.replicaID, " \t\n"):
		return 0, flagError(o.flags, "replica-id", "want a name without spaces, got %q", o.replicaID)
	case o.maxToolRounds < 0:
		return 0, flagError(o.flags, "max-tool-rounds", "want 0 (no limit) or more, got %d", o.maxToolRounds)
	case o.maxCompactions < 0:
		return 0, flagError(o.flags, "max-compactions", "want 0 (no limit) or more, got %d", o.maxCompactions)
	case o.maxAttempts < 1:
		return 0, flagError(o.flags, "model-max-attempts", "want at least 1, got %d", o.maxAttempts)
	case o.retryBase <= 0:
		return 0, flagError(o.flags, "model-retry-base", "want a positive duration, got %s", o.retryBase)
	case o.memoryRetention < time.Hour:
		return 0, flagError(o.flags, "memory-version-retention", "want at least 1h, got %s", o.memoryRetention)
	case o.retryMax < o.retryBase:
		return 0, flagError(o.flags, "model-retry-max", "want at least --model-retry-base (%s), got %s", o.retryBase, o.retryMax)
	case o.modelConcurrency < 0:
		return 0, flagError(o.flags, "model-concurrency", "want 0 (no bound) or more, got %d", o.modelConcurrency)
	case o.processBudget < 0:
		return 0, flagError(o.flags, "sandbox-process-budget", "want 0 (this machine's) or more, got %d", o.processBudget)
	case o.shutdownGrace < 0:
		return 0, flagError(o.flags, "shutdown-grace", "want a duration of 0 or more, got %s", o.shutdownGrace)
	case o.bodyTimeout <= 0:
		return 0, flagError(o.flags, "body-timeout", "want a positive duration, got %s", o.bodyTimeout)
	case o.limits.CreatesPerMinute < 0:
		return 0, flagError(o.flags, "creates-per-minute", "want 0 (no limit) or more, got %d", o.limits.CreatesPerMinute)
	case o.limits.RequestsPerMinute < 0:
		return 0, flagError(o.flags, "requests-per-minute", "want 0 (no limit) or more, got %d", o.limits.RequestsPerMinute)
	case o.maxRequests < 0:
		return 0, flagError(o.flags, "max-requests", "want 0 (no bound) or more, got %d", o.maxRequests)
	case o.maxStreams < 0:
		return 0, flagError(o.flags, "max-streams", "want 0 (the open-file limit's bound) or more, got %d", o.maxStreams)
	case o.limits.Streams < 0:
		return 0, flagError(o.flags, "streams-per-key", "want 0 (no limit) or more, got %d", o.limits.Streams)
	case o.addr == "":
		return 0, flagError(o.flags, "addr", "want a listen address such as 127.0.0.1:4180")
	case o.dataDir == "":
		return 0, flagError(o.flags, "data-dir", "want a directory")
	}
	if err := o.checkTLS(); err != nil {
		return 0, err
	}
	for name, n := range o.providerConc {
		if name != "anthropic" && name != "openai" && name != "scripted" {
			return 0, flagError(o.flags, "model-provider-concurrency", "unknown provider %q (anthropic, openai, scripted)", name)
		}
		if n < 0 {
			return 0, flagError(o.flags, "model-provider-concurrency", "want 0 (no bound) or more for %s, got %d", name, n)
		}
	}
	return level, nil
}

func runServe(cmd *cobra.Command, o *serveOptions) error {
	level, err := o.check()
	if err != nil {
		return err
	}
	logger, err := newLogger(o.flags, cmd.ErrOrStderr(), o.logFormat, level)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tlsConfig, err := serverTLS(ctx, &o.tls, logger)
	if err != nil {
		return err
	}

	models, err := buildModels(o, logger)
	if err != nil {
		return err
	}
	sbx, err := o.sandbox.config()
	if err != nil {
		return err
	}
	if o.memoryBudget != "" {
		if sbx.MemoryBudget, err = parseBytes(o.memoryBudget); err != nil {
			return flagError(o.flags, "sandbox-memory-budget", "%v", err)
		}
	}
	sbx.ProcessBudget = o.processBudget
	for _, h := range o.cleartextCredentials {
		if err := egress.CheckHost(h); err != nil {
			return flagError(o.flags, "egress-cleartext-credentials", "%v", err)
		}
	}
	sbx.CleartextCredentialHosts = o.cleartextCredentials
	outbound, err := netguard.ParseAllow(o.outboundAllow)
	if err != nil {
		return fmt.Errorf("--outbound-allow: %w", err)
	}
	pkgs, err := o.packages()
	if err != nil {
		return err
	}
	// Lock the data dir first, so a second server on it names the first
	// whatever port it asks for; then bind before anything is created: a
	// start that cannot listen leaves the data dir as it was (but for the
	// lock file), so the next start is still a first start.
	lock, err := app.LockDataDir(o.dataDir)
	if err != nil {
		return err
	}
	defer lock.Release() // a no-op once app.New adopted it
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	url := reachableURL(o.tls.scheme(), o.addr, ln.Addr())
	if err := lock.SetURL(url); err != nil {
		ln.Close()
		return err
	}
	if err := checkNotSelf(o.anthropicBaseURL, ln.Addr()); err != nil {
		ln.Close()
		return err
	}
	var debug *debugServer
	if o.debugAddr != "" {
		if debug, err = listenDebug(o.debugAddr, logger); err != nil {
			ln.Close()
			return flagError(o.flags, "debug-addr", "%v", err)
		}
		defer debug.close()
	}
	tel, err := o.startTelemetry(logger)
	if err != nil {
		ln.Close()
		return err
	}
	defer tel.close()
	prices := pricing.Default()
	if o.priceFile != "" {
		if prices, err = pricing.Load(o.priceFile); err != nil {
			ln.Close()
			return flagError(o.flags, "price-file", "%v", err)
		}
	}
	bootstrap := os.Getenv("REINS_API_KEY")
	a, err := app.New(ctx, app.Config{DataDir: o.dataDir, DatabaseURL: o.databaseURL, ReplicaID: o.replicaID, LeaseTTL: o.leaseTTL, AdvertiseURL: o.advertiseURL, BootstrapKey: bootstrap, Models: models, Logger: logger,
		ModelConcurrency: o.modelConcurrency, ProviderConcurrency: o.providerConc, GraderModel: o.graderModel, Prices: prices, MaxToolRounds: o.maxToolRounds, MaxCompactions: o.maxCompactions,
		Retry: harness.RetryPolicy{MaxAttempts: o.maxAttempts, BaseDelay: o.retryBase, MaxDelay: o.retryMax}, MemoryVersionRetention: o.memoryRetention, Sandbox: sbx, Packages: pkgs, OutboundAllow: outbound, Webhooks: o.webhooks,
		HTTP: o.httpConfig(), Metrics: tel.metrics, Tracing: tel.tracing, TLS: tlsConfig, DataDirLock: lock})
	if err != nil {
		ln.Close()
		return err
	}
	first, err := firstStart(ctx, a, o, bootstrap)
	if err != nil {
		ln.Close()
		a.Shutdown(context.Background())
		return err
	}
	if err := a.Start(ctx, ln); err != nil {
		a.Shutdown(context.Background())
		return err
	}
	first.url = url
	printBanner(cmd.OutOrStdout(), first)
	logger.Info("reins serving", "url", url, "data_dir", o.dataDir)
	if debug != nil {
		logger.Info("debug listener serving", "url", debug.url)
	}
	if tel.srv != nil {
		logger.Info("metrics listener serving", "url", tel.url)
	}

	<-ctx.Done()
	logger.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), o.shutdownGrace)
	defer cancel()
	if err := a.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	logger.Info("stopped")
	return nil
}

// reachableURL is the URL a client on this machine reaches a listener at,
// bound as asked by addr (--addr): an unspecified address (":8080",
// "0.0.0.0:8080", "[::]:8080", all of which Go reports as "[::]") is not
// one, so it becomes 127.0.0.1 with the port, or localhost for an IPv6
// "::" asked for explicitly (which may not accept IPv4). scheme is http or
// https.
func reachableURL(scheme, addr string, bound net.Addr) string {
	tcp, ok := bound.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return scheme + "://" + bound.String()
	}
	host := "127.0.0.1"
	if h, _, err := net.SplitHostPort(addr); err == nil && strings.Contains(h, ":") {
		host = "localhost"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(tcp.Port))
}

// checkNotSelf refuses an Anthropic base URL that is this server: reins
// would send its model calls to itself. ANTHROPIC_BASE_URL is also what
// SDK programs read to find reins, so it is easily left set.
func checkNotSelf(baseURL string, listen net.Addr) error {
	if baseURL == "" {
		return nil
	}
	u, err := neturl.Parse(baseURL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("--anthropic-base-url (ANTHROPIC_BASE_URL): %q is not a URL", baseURL)
	}
	tcp, ok := listen.(*net.TCPAddr)
	if !ok {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port != strconv.Itoa(tcp.Port) {
		return nil
	}
	host := u.Hostname()
	ip := net.ParseIP(host)
	self := host == "localhost" || (ip != nil && (ip.Equal(tcp.IP) || (ip.IsLoopback() && (tcp.IP.IsLoopback() || tcp.IP.IsUnspecified())) || tcp.IP.IsUnspecified() && ip.IsLoopback()))
	if !self {
		return nil
	}
	return fmt.Errorf("--anthropic-base-url (ANTHROPIC_BASE_URL) is %s, this server itself: reins would send its model calls to itself. "+
		"Unset ANTHROPIC_BASE_URL for `reins serve` (it is for SDK programs that talk to reins), or point it at the Messages API", baseURL)
}

// firstStart creates what a first start creates (the first API key, the
// demo agent and environment) and says what to print about them.
func firstStart(ctx context.Context, a *app.App, o *serveOptions, bootstrap string) (*banner, error) {
	key, keyPath, err := a.EnsureKey(ctx, o.dataDir, bootstrap)
	if err != nil {
		return nil, err
	}
	demoModel := "scripted"
	if o.anthropicKey != "" {
		demoModel = anthropic.DefaultModel
	}
	demo, err := a.SeedDemo(ctx, demoModel)
	if err != nil {
		return nil, err
	}
	b := &banner{dataDir: o.dataDir, key: key, keyPath: keyPath, demo: demo, bootstrap: bootstrap != ""}
	b.defaultDir = o.dataDir == defaultDataDir()
	return b, nil
}

// httpConfig returns the API's settings of the flags: the body timeout,
// the per-key limits and the bounds on requests and streams at once.
func (o *serveOptions) httpConfig() httpapi.Config {
	return httpapi.Config{BodyTimeout: o.bodyTimeout, Limits: o.limits, MaxRequests: o.maxRequests, MaxStreams: o.maxStreams, MaxFileSize: o.maxFileSize}
}

// packages returns the packages mirrors of the flags, checked.
func (o *serveOptions) packages() (toolhost.PackagesConfig, error) {
	for _, f := range []struct{ name, value string }{{"--pip-index-url", o.pipIndexURL}, {"--npm-registry", o.npmRegistry}} {
		if f.value == "" {
			continue
		}
		if err := toolhost.CheckMirrorURL(f.value); err != nil {
			return toolhost.PackagesConfig{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return toolhost.PackagesConfig{PipIndexURL: o.pipIndexURL, NpmRegistry: o.npmRegistry}, nil
}

// banner is what the start prints.
type banner struct {
	url, dataDir string
	// defaultDir: the data dir is the CLI's default too.
	defaultDir bool
	// key is a first key made now (shown once), kept in keyPath.
	key, keyPath string
	// bootstrap: REINS_API_KEY was given.
	bootstrap bool
	demo      *app.Demo
}

func printBanner(w io.Writer, b *banner) {
	fmt.Fprintf(w, "reins is serving the Managed Agents API at %s\n", b.url)
	fmt.Fprintf(w, "data: %s\n", b.dataDir)
	if b.key != "" {
		fmt.Fprintf(w, "\nA first API key was created. It is shown once, here, and kept in %s (mode 0600):\n\n    %s\n\n", b.keyPath, b.key)
	}
	if b.demo == nil {
		return
	}
	// The hints name what differs from the CLI's defaults, so that they
	// work as printed in another shell.
	var flags []string
	if b.url != defaultURL {
		flags = append(flags, "--url "+b.url)
	}
	keyHeader := `"x-api-key: $REINS_API_KEY"`
	keyNote := "the CLI reads REINS_API_KEY, which this server accepts"
	if !b.bootstrap || b.key != "" {
		path := filepath.Join(b.dataDir, app.KeyFile)
		keyHeader = fmt.Sprintf(`"x-api-key: $(cat %s)"`, shellQuote(path))
		keyNote = "the CLI reads the key file " + path
		if !b.defaultDir {
			flags = append(flags, "--data-dir "+shellQuote(b.dataDir))
		}
	}
	cli := "reins sessions run"
	for _, f := range flags {
		cli += " " + f
	}
	fmt.Fprintf(w, `
A demo agent and environment are ready (model %s):
    agent        %s
    environment  %s

Talk to them (%s):
    %s --agent %s --environment %s "Hello"
    curl -s %s/v1/agents -H %s

or with the official Go SDK (github.com/anthropics/anthropic-sdk-go/v2):
    client := anthropic.NewClient(option.WithBaseURL("%s"), option.WithAPIKey(key))
    sess, _ := client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
        Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String("%s")},
        EnvironmentID: "%s",
    })
`, b.demo.Model, b.demo.AgentID, b.demo.EnvironmentID, keyNote, cli, b.demo.AgentID, b.demo.EnvironmentID, b.url, keyHeader, b.url, b.demo.AgentID, b.demo.EnvironmentID)
}

// shellQuote quotes s for a POSIX shell when it needs quoting.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r == '~' || unicode.IsLetter(r) || unicode.IsDigit(r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// buildModels configures the model providers from the flags. A provider
// without a key or base URL is left out: its models then fail with a clear
// "not configured" session.error instead of calling an API without
// credentials.
func buildModels(o *serveOptions, logger *slog.Logger) (model.Router, error) {
	r := model.Router{}
	if o.anthropicKey != "" || o.anthropicBaseURL != "" {
		r["anthropic"] = anthropic.New(anthropic.Options{APIKey: o.anthropicKey, BaseURL: o.anthropicBaseURL, Logger: logger})
	}
	if o.openaiKey != "" || o.openaiBaseURL != "" {
		r["openai"] = openai.New(openai.Options{APIKey: o.openaiKey, BaseURL: o.openaiBaseURL, Logger: logger})
	}
	return r, nil
}
