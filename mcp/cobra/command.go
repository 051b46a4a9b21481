package cobra

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	cc "github.com/spf13/cobra"

	"github.com/reinsdev/reins/mcp"
)

// CommandOptions configure [NewCommand].
type CommandOptions struct {
	// Binding configures the binding of the root's tree.
	Binding Options
	// Server configures the MCP server. Name defaults to the root's name.
	Server mcp.Options
	// ShutdownBudget bounds the shutdown of server and binding when
	// serving ends. Zero means 10 seconds.
	ShutdownBudget time.Duration
	// TokenEnv is the environment variable that gives the bearer token
	// of --http when --token is not set. Empty means ROOT_MCP_TOKEN (the
	// root's name in upper case).
	TokenEnv string
}

// NewCommand returns an "mcp" command for root with two subcommands:
// "serve" exposes root's tree over MCP on stdio (or, with --http ADDR, over
// streamable HTTP at /mcp), and "tools" prints the catalogue as a JSON
// array. The mcp command itself carries OmitAnnotation, so its subtree is
// never published.
func NewCommand(root *cc.Command, opts CommandOptions) *cc.Command {
	cmd := &cc.Command{
		Use:         "mcp",
		Short:       "Serve this CLI to MCP clients",
		Annotations: map[string]string{OmitAnnotation: "true"},
	}
	var addr, level, token string
	var direct bool
	tokenEnv := opts.TokenEnv
	if tokenEnv == "" {
		tokenEnv = strings.ToUpper(root.Name()) + "_MCP_TOKEN"
	}
	serve := &cc.Command{
		Use:   "serve",
		Short: "Serve the CLI over MCP (stdio, or streamable HTTP with --http)",
		Args:  cc.NoArgs,
		RunE: func(cmd *cc.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			srv, b, err := build(root, opts, level, direct, cmd)
			if err != nil {
				return err
			}
			if token == "" {
				token = os.Getenv(tokenEnv)
			}
			serveErr := serveOn(ctx, srv, addr, token, cmd)
			budget := opts.ShutdownBudget
			if budget <= 0 {
				budget = 10 * time.Second
			}
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
			defer cancel()
			return errors.Join(serveErr, srv.Shutdown(sctx), b.Shutdown(sctx))
		},
	}
	serve.Flags().StringVar(&addr, "http", "", "serve streamable HTTP on `ADDR` (path /mcp) instead of stdio; clients must send the bearer token")
	serve.Flags().StringVar(&token, "token", "", "bearer token that --http requires ("+tokenEnv+"); without one, a random token is made and printed once")
	serve.Flags().StringVar(&level, "log-level", "info", "log level on stderr: debug, info, warn or error")
	serve.Flags().BoolVar(&direct, "direct", false, "publish one MCP tool per command instead of the compact three")
	tools := &cc.Command{
		Use:   "tools",
		Short: "Print the catalogue of operations as JSON",
		Args:  cc.NoArgs,
		RunE: func(cmd *cc.Command, _ []string) error {
			srv, _, err := build(root, opts, "error", direct, cmd)
			if err != nil {
				return err
			}
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			return enc.Encode(srv.Catalogue(cmd.Context(), "stdio"))
		},
	}
	cmd.AddCommand(serve, tools)
	return cmd
}

// build makes the binding and the server.
func build(root *cc.Command, opts CommandOptions, level string, direct bool, cmd *cc.Command) (*mcp.Server, *Binding, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: lv}))
	bo := opts.Binding
	if bo.Logger == nil {
		bo.Logger = log
	}
	b, err := New(root, bo)
	if err != nil {
		return nil, nil, err
	}
	so := opts.Server
	if so.Name == "" {
		so.Name = root.Name()
	}
	if so.Version == "" {
		so.Version = root.Version
	}
	if so.Logger == nil {
		so.Logger = log
	}
	if direct {
		so.Mode = mcp.Direct
	}
	srv := mcp.NewServer(so)
	if err := srv.Add(b.Operations()...); err != nil {
		return nil, nil, err
	}
	return srv, b, nil
}

// serveOn serves until ctx ends or the peer goes away. Over HTTP every
// request must carry token as a bearer token; an empty token is replaced
// by a random one, printed once.
func serveOn(ctx context.Context, srv *mcp.Server, addr, token string, cmd *cc.Command) error {
	if addr == "" {
		return srv.ServeStdio(ctx, os.Stdin, nopCloser{cmd.OutOrStdout()})
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	generated := token == ""
	if generated {
		var b [24]byte
		rand.Read(b[:])
		token = hex.EncodeToString(b[:])
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", requireBearer(token, srv.HTTPHandler(mcp.HTTPOptions{})))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(cmd.ErrOrStderr(), "serving MCP at http://%s/mcp (clients send Authorization: Bearer TOKEN)\n", ln.Addr())
	if generated {
		fmt.Fprintf(cmd.ErrOrStderr(), "bearer token (generated, shown once; give one with --token to keep it across restarts): %s\n", token)
	}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(sctx)
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// requireBearer answers 401 to a request without the bearer token.
func requireBearer(token string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcp"`)
			http.Error(w, "missing or wrong bearer token: send Authorization: Bearer TOKEN (the token mcp serve printed or was given)", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

type nopCloser struct {
	w interface{ Write([]byte) (int, error) }
}

func (n nopCloser) Write(p []byte) (int, error) { return n.w.Write(p) }
func (nopCloser) Close() error                  { return nil }
