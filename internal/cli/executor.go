package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/reinsdev/reins/executor"
	"github.com/reinsdev/reins/internal/toolhost"
)

// newExecutorCommand returns `reins executor`: a self-hosted executor
// ("hands") that connects to a reins server and runs the tools of the
// sessions of one environment in per-session subdirectories of a
// workspace.
func newExecutorCommand() *cobra.Command {
	var (
		url, key, workspace, name string
		caCert, logFormat         string
		maxSessions, maxReconnect int
		confirm, noSandbox        bool
		confirmTimeout            time.Duration
		sbx                       sandboxFlags
	)
	cmd := &cobra.Command{
		Use:   "executor",
		Short: "Run the tools of a self-hosted environment on this machine",
		Long: `reins executor connects this machine to a reins server as an executor of one
self-hosted environment. Sessions of that environment run their tools (bash,
read, write, edit, glob, grep) here, each in its own subdirectory of the
workspace; nothing outside the workspace is reachable. It reconnects until it
is stopped, and exits non-zero on a terminal error (a revoked key, another
executor with the same name, a refused registration).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return fmt.Errorf("reins executor: %w", err)
			}
			if url == "" {
				url = os.Getenv("REINS_URL")
			}
			if key == "" {
				key = os.Getenv("REINS_ENVIRONMENT_KEY")
			}
			switch {
			case url == "":
				return errors.New("reins executor: --url (or REINS_URL) is required")
			case key == "":
				return errors.New("reins executor: --environment-key (or REINS_ENVIRONMENT_KEY) is required")
			case workspace == "":
				return errors.New("reins executor: --workspace is required")
			}
			dir, err := filepath.Abs(workspace)
			if err == nil {
				err = os.MkdirAll(dir, 0o755)
			}
			if err != nil {
				return fmt.Errorf("reins executor: workspace: %w", err)
			}
			if name == "" {
				name, _ = os.Hostname()
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()

			out := cmd.ErrOrStderr()
			st := &executorStatus{w: out, started: make(map[string]time.Time)}
			logger, err := newLogger(cmd.Flags(), out, logFormat, slog.LevelWarn)
			if err != nil {
				return fmt.Errorf("reins executor: %w", err)
			}
			if logFormat == "json" || logFormat == "JSON" {
				st.log = slog.New(slog.NewJSONHandler(out, nil))
			}
			httpClient, err := caClient(caCert)
			if err != nil {
				return fmt.Errorf("reins executor: %w", err)
			}
			if noSandbox {
				sbx.mode = toolhost.SandboxNone
			}
			sessions := &executor.BuiltinSessions{Dir: dir, NoSandbox: noSandbox, Logger: logger}
			closeSandboxes, err := sbx.executorSandboxes(ctx, sessions, dir, logger)
			if err != nil {
				return fmt.Errorf("reins executor: %w", err)
			}
			defer closeSandboxes()
			opts := executor.Options{
				URL:                  url,
				HTTPClient:           httpClient,
				EnvironmentKey:       key,
				Executor:             executor.ExecutorInfo{Name: name, Version: executorVersion()},
				MaxSessions:          maxSessions,
				MaxReconnectAttempts: maxReconnect,
				Sessions:             sessions,
				Capabilities:         executor.BuiltinCapabilities(),
				OnEvent:              st.event,
				Logger:               logger,
			}
			if confirm {
				p := &confirmPrompt{in: cmd.InOrStdin(), out: out}
				opts.Confirm = p.ask
				opts.ConfirmTimeout = confirmTimeout
			}
			if st.log != nil {
				st.log.Info("reins executor starting", "name", name, "workspace", dir, "max_sessions", max(maxSessions, 1), "server", url)
			} else {
				fmt.Fprintf(out, "reins executor %q: workspace %s, up to %d session(s), server %s\n", name, dir, max(maxSessions, 1), url)
			}
			err = executor.NewClient(opts).Run(ctx)
			if errors.Is(err, executor.ErrClientStopped) && ctx.Err() != nil {
				fmt.Fprintln(out, "reins executor: stopped")
				return nil
			}
			return fmt.Errorf("reins executor: %s", explainExecutorError(err))
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "base URL of the reins server (env REINS_URL)")
	f.StringVar(&key, "environment-key", "", "environment key of the self-hosted environment (env REINS_ENVIRONMENT_KEY)")
	f.StringVar(&workspace, "workspace", "", "directory that holds the session workspaces")
	f.StringVar(&name, "name", "", "executor name, unique in the environment (default the host name)")
	f.IntVar(&maxSessions, "max-sessions", 1, "sessions run at once")
	f.IntVar(&maxReconnect, "max-reconnect-attempts", 0, "give up after this many failed reconnects in a row (0: never)")
	f.BoolVar(&confirm, "confirm", false, "ask at this terminal before each bash, write or edit call")
	f.DurationVar(&confirmTimeout, "confirm-timeout", time.Minute, "how long a --confirm question waits for an answer")
	f.BoolVar(&noSandbox, "no-sandbox", false, "no confinement at all: --sandbox=none, and without Landlock either")
	f.StringVar(&caCert, "ca-cert", "", "PEM file of CA certificates to trust for an https:// server, besides the system's, e.g. a private CA's (REINS_CA_CERT); SSL_CERT_FILE instead replaces the system's")
	registerLogFormat(f, &logFormat)
	bindEnv(f, envFallback{"ca-cert", "REINS_CA_CERT"})
	sbx.register(f, "the sessions'")
	return cmd
}

func executorVersion() string { return "reins" }

// explainExecutorError turns a terminal client error into a sentence.
func explainExecutorError(err error) string {
	switch {
	case errors.Is(err, executor.ErrCredentialRejected):
		return "the environment key was rejected (invalid, revoked, archived, or of a cloud environment): " + err.Error()
	case errors.Is(err, executor.ErrReplaced):
		return "another executor with the same name connected to this environment (close 4004); this one stops"
	case errors.Is(err, executor.ErrRegistrationRefused):
		return "the server refused this executor's registration: " + err.Error()
	case executor.CloseCode(err) == executor.CloseUnsupportedProtocol:
		return "the server does not speak this executor's protocol (close 4003); upgrade reins"
	case errors.Is(err, executor.ErrReconnectExhausted):
		return "gave up reconnecting: " + err.Error()
	}
	return err.Error()
}

// executorStatus prints the connection state and the running tools.
type executorStatus struct {
	mu sync.Mutex // guards the fields below; held for each line written
	w  io.Writer
	// log, if set (--log-format json), gets the lines instead of w.
	log       *slog.Logger
	connected bool
	started   map[string]time.Time
}

func (s *executorStatus) event(e executor.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch e.Type {
	case executor.EventConnecting:
		s.line("connecting (attempt %d)", e.Attempt)
	case executor.EventRegistered:
		s.connected = true
		s.line("connected: serving")
	case executor.EventDisconnected:
		if s.connected {
			s.line("disconnected: %v", e.Err)
		} else {
			s.line("could not connect: %v", e.Err)
		}
		s.connected = false
	case executor.EventSessionAssigned:
		s.line("session %s assigned", e.SessionID)
	case executor.EventSessionReleased:
		s.line("session %s released", e.SessionID)
	case executor.EventToolStarted:
		s.started[e.ToolCallID] = time.Now()
		s.line("▶ %s [%s] running (%d running)", e.Tool, e.SessionID, len(s.started))
	case executor.EventToolFinished:
		d := time.Since(s.started[e.ToolCallID]).Round(time.Millisecond)
		delete(s.started, e.ToolCallID)
		outcome := "ok"
		if e.Result != nil && e.Result.IsError {
			outcome = "error " + e.Result.ErrorCode
		}
		s.line("■ %s [%s] %s in %s (%d running)", e.Tool, e.SessionID, outcome, d, len(s.started))
	}
}

// line prints a status line, or logs it with --log-format json.
func (s *executorStatus) line(format string, args ...any) {
	if s.log != nil {
		s.log.Info(fmt.Sprintf(format, args...))
		return
	}
	fmt.Fprintf(s.w, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// confirmPrompt asks the person at the terminal, one question at a time.
type confirmPrompt struct {
	mu    sync.Mutex // held for a whole question: one at a time on out
	in    io.Reader
	out   io.Writer
	once  sync.Once
	lines chan string
}

func (p *confirmPrompt) ask(ctx context.Context, req executor.ConfirmRequest) (bool, error) {
	p.once.Do(func() {
		p.lines = make(chan string)
		// Reads the terminal for the life of the process.
		go func() {
			sc := bufio.NewScanner(p.in)
			for sc.Scan() {
				p.lines <- sc.Text()
			}
			close(p.lines)
		}()
	})
	p.mu.Lock()
	defer p.mu.Unlock()
	input := string(req.Input)
	if len(input) > 400 {
		input = input[:400] + "…"
	}
	deadline, _ := ctx.Deadline()
	fmt.Fprintf(p.out, "\nsession %s wants to run %s %s\nallow? [y/N] (%s to answer) ", req.SessionID, req.Tool, input, time.Until(deadline).Round(time.Second))
	select {
	case line, ok := <-p.lines:
		if !ok {
			return false, io.EOF
		}
		a := strings.ToLower(strings.TrimSpace(line))
		return a == "y" || a == "yes", nil
	case <-ctx.Done():
		fmt.Fprintln(p.out, "\n(no answer: the call is refused as expired)")
		return false, ctx.Err()
	}
}
