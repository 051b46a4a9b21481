package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/harness"
	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/netguard"
	"github.com/reinsdev/reins/model"
	"github.com/reinsdev/reins/model/anthropic"
	"github.com/reinsdev/reins/model/openai"
)

type serveOptions struct {
	addr, dataDir    string
	databaseURL      string
	anthropicKey     string
	anthropicBaseURL string
	openaiKey        string
	openaiBaseURL    string
	maxAttempts      int
	retryBase        time.Duration
	retryMax         time.Duration
	shutdownGrace    time.Duration
	logLevel         string
	outboundAllow    []string
	sandbox          sandboxFlags
	pipIndexURL      string
	npmRegistry      string
}

func newServeCommand() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the Managed Agents API",
		Long: `Serve the Claude Managed Agents API: point the official Anthropic SDK
(ANTHROPIC_BASE_URL) at it. Everything is kept in an embedded SQLite database
in the data dir; nothing else needs installing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runServe(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", envOr("REINS_ADDR", "127.0.0.1:4180"), "listen address (REINS_ADDR)")
	f.StringVar(&o.dataDir, "data-dir", envOr("REINS_DATA_DIR", defaultDataDir()), "data directory (REINS_DATA_DIR)")
	f.StringVar(&o.databaseURL, "database-url", os.Getenv("REINS_DATABASE_URL"), "PostgreSQL URL (postgres://…) to keep the store in instead of SQLite in the data dir (REINS_DATABASE_URL); one reins process per database for now")
	f.StringVar(&o.anthropicKey, "anthropic-api-key", os.Getenv("ANTHROPIC_API_KEY"), "Anthropic API key for claude-* models (ANTHROPIC_API_KEY)")
	f.StringVar(&o.anthropicBaseURL, "anthropic-base-url", os.Getenv("ANTHROPIC_BASE_URL"), "Messages API base URL (ANTHROPIC_BASE_URL)")
	f.StringVar(&o.openaiKey, "openai-api-key", os.Getenv("OPENAI_API_KEY"), "API key for openai/* models (OPENAI_API_KEY)")
	f.StringVar(&o.openaiBaseURL, "openai-base-url", os.Getenv("OPENAI_BASE_URL"), "Chat Completions base URL for openai/* models (OPENAI_BASE_URL)")
	f.IntVar(&o.maxAttempts, "model-max-attempts", envInt("REINS_MODEL_MAX_ATTEMPTS", 4), "tries of one model call before the turn is abandoned (REINS_MODEL_MAX_ATTEMPTS)")
	f.DurationVar(&o.retryBase, "model-retry-base", envDuration("REINS_MODEL_RETRY_BASE", time.Second), "first retry delay, doubled each retry (REINS_MODEL_RETRY_BASE)")
	f.DurationVar(&o.retryMax, "model-retry-max", envDuration("REINS_MODEL_RETRY_MAX", 30*time.Second), "longest retry delay (REINS_MODEL_RETRY_MAX)")
	f.DurationVar(&o.shutdownGrace, "shutdown-grace", 10*time.Second, "how long shutdown waits for requests and runners")
	f.StringVar(&o.logLevel, "log-level", envOr("REINS_LOG_LEVEL", "info"), "debug, info, warn or error (REINS_LOG_LEVEL)")
	f.StringSliceVar(&o.outboundAllow, "outbound-allow", splitList(os.Getenv("REINS_OUTBOUND_ALLOW")),
		"internal addresses (CIDR or IP: loopback, private, link-local) that the server's own requests to URLs users give (agents' MCP servers, OAuth token endpoints, mcp_oauth_validate) may reach anyway; refused by default (REINS_OUTBOUND_ALLOW)")
	o.sandbox.register(f, "cloud sessions'")
	f.StringVar(&o.pipIndexURL, "pip-index-url", os.Getenv("REINS_PIP_INDEX_URL"),
		"PyPI simple index (e.g. a mirror, http://host/simple/) that cloud environments' pip packages are installed from instead of pypi.org; installs may reach its host. A mirror on an internal address also needs --egress-allow (REINS_PIP_INDEX_URL)")
	f.StringVar(&o.npmRegistry, "npm-registry", os.Getenv("REINS_NPM_REGISTRY"),
		"npm registry (e.g. a mirror) that cloud environments' npm packages are installed from instead of registry.npmjs.org; installs may reach its host. A mirror on an internal address also needs --egress-allow (REINS_NPM_REGISTRY)")
	return cmd
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return d
	}
	return def
}

func runServe(cmd *cobra.Command, o serveOptions) error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	models, err := buildModels(o, logger)
	if err != nil {
		return err
	}
	sbx, err := o.sandbox.config()
	if err != nil {
		return err
	}
	outbound, err := netguard.ParseAllow(o.outboundAllow)
	if err != nil {
		return fmt.Errorf("--outbound-allow: %w", err)
	}
	pkgs, err := o.packages()
	if err != nil {
		return err
	}
	bootstrap := os.Getenv("REINS_API_KEY")
	a, err := app.New(ctx, app.Config{DataDir: o.dataDir, DatabaseURL: o.databaseURL, BootstrapKey: bootstrap, Models: models, Logger: logger,
		Retry: harness.RetryPolicy{MaxAttempts: o.maxAttempts, BaseDelay: o.retryBase, MaxDelay: o.retryMax}, Sandbox: sbx, Packages: pkgs, OutboundAllow: outbound})
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	key, keyPath, err := a.EnsureKey(ctx, o.dataDir, bootstrap)
	if err != nil {
		a.Shutdown(context.Background())
		return err
	}
	demoModel := "scripted"
	if o.anthropicKey != "" {
		demoModel = anthropic.DefaultModel
	}
	demo, err := a.SeedDemo(ctx, demoModel)
	if err != nil {
		a.Shutdown(context.Background())
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		a.Shutdown(context.Background())
		return fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	url := "http://" + ln.Addr().String()
	if err := a.Start(ctx, ln); err != nil {
		a.Shutdown(context.Background())
		return err
	}
	printBanner(out, url, o.dataDir, key, keyPath, demo)
	logger.Info("reins serving", "url", url, "data_dir", o.dataDir)

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

// packages returns the packages mirrors of the flags, checked.
func (o serveOptions) packages() (app.PackagesConfig, error) {
	for _, f := range []struct{ name, value string }{{"--pip-index-url", o.pipIndexURL}, {"--npm-registry", o.npmRegistry}} {
		if f.value == "" {
			continue
		}
		if err := app.CheckMirrorURL(f.value); err != nil {
			return app.PackagesConfig{}, fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return app.PackagesConfig{PipIndexURL: o.pipIndexURL, NpmRegistry: o.npmRegistry}, nil
}

func printBanner(w io.Writer, url, dataDir, key, keyPath string, demo *app.Demo) {
	fmt.Fprintf(w, "reins is serving the Managed Agents API at %s\n", url)
	fmt.Fprintf(w, "data: %s\n", dataDir)
	if key != "" {
		fmt.Fprintf(w, "\nA first API key was created. It is shown once, here, and kept in %s (mode 0600):\n\n    %s\n\n", keyPath, key)
	}
	if demo != nil {
		fmt.Fprintf(w, `
A demo agent and environment are ready (model %s):
    agent        %s
    environment  %s

Talk to them (the CLI reads REINS_URL and REINS_API_KEY; the key file is read by default):
    reins sessions run --agent %s --environment %s "Hello"
    curl -s %s/v1/agents -H "x-api-key: $(cat %s)"

or with the official Go SDK (github.com/anthropics/anthropic-sdk-go/v2):
    client := anthropic.NewClient(option.WithBaseURL("%s"), option.WithAPIKey(key))
    sess, _ := client.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
        Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String("%s")},
        EnvironmentID: "%s",
    })
`, demo.Model, demo.AgentID, demo.EnvironmentID, demo.AgentID, demo.EnvironmentID, url, keyPathOr(keyPath, dataDir), url, demo.AgentID, demo.EnvironmentID)
	}
}

func keyPathOr(p, dataDir string) string {
	if p != "" {
		return p
	}
	return dataDir + "/" + app.KeyFile
}

// buildModels configures the model providers from the flags. A provider
// without a key or base URL is left out: its models then fail with a clear
// "not configured" session.error instead of calling an API without
// credentials.
func buildModels(o serveOptions, logger *slog.Logger) (model.Router, error) {
	r := model.Router{}
	if o.anthropicKey != "" || o.anthropicBaseURL != "" {
		r["anthropic"] = anthropic.New(anthropic.Options{APIKey: o.anthropicKey, BaseURL: o.anthropicBaseURL, Logger: logger})
	}
	if o.openaiKey != "" || o.openaiBaseURL != "" {
		r["openai"] = openai.New(openai.Options{APIKey: o.openaiKey, BaseURL: o.openaiBaseURL, Logger: logger})
	}
	return r, nil
}
