// Command mcp-conformance is a direct-mode fixture server for the official
// MCP conformance suite (@modelcontextprotocol/conformance). It publishes
// the tools, resources and prompts the suite's server scenarios call, all
// tools through the reins mcp package, and serves streamable HTTP at /mcp:
//
//	go run ./cmd/mcp-conformance -addr 127.0.0.1:3001
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/reinsdev/reins/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3001", "listen on `HOST:PORT`; the endpoint is /mcp")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addr string) error {
	srv := newServer(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.HTTPHandler(mcp.HTTPOptions{Stateful: true, EventStore: sdk.NewMemoryEventStore(nil)}))
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "mcp-conformance: serving http://%s/mcp\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return errors.Join(srv.Shutdown(sctx), hs.Shutdown(sctx))
}

// newServer builds the fixture: tools through mcp.Server.Add, prompts,
// resources and completions through the underlying SDK server.
func newServer(log *slog.Logger) *mcp.Server {
	srv := mcp.NewServer(mcp.Options{
		Name:    "reins-mcp-conformance",
		Version: "1.0.0",
		Mode:    mcp.Direct,
		Logger:  log,
		SDKOptions: &sdk.ServerOptions{
			CompletionHandler:  complete,
			SubscribeHandler:   func(context.Context, *sdk.SubscribeRequest) error { return nil },
			UnsubscribeHandler: func(context.Context, *sdk.UnsubscribeRequest) error { return nil },
		},
	})
	if err := srv.Add(tools()...); err != nil {
		panic(err) // the fixture's own definitions are fixed
	}
	addResources(srv.SDK())
	addPrompts(srv.SDK())
	return srv
}
