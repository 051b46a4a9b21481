// Command mcp-bench measures tools/call round trips of the same trivial
// tool served by reins's mcp package (direct and compact mode), by a bare
// github.com/modelcontextprotocol/go-sdk server and by
// github.com/mark3labs/mcp-go, over stdio and streamable HTTP; and the
// per-call overhead of the Cobra binding beside exec'ing the same binary.
//
// Every server runs in a child process (this binary, re-executed) and
// every client is the official go-sdk client, so only the servers differ.
//
//	cd bench/mcp && go run . [-n 3000] [-cobra-n 300]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	mark "github.com/mark3labs/mcp-go/mcp"
	markserver "github.com/mark3labs/mcp-go/server"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	cc "github.com/spf13/cobra"

	"github.com/reinsdev/reins/mcp"
	mcpcobra "github.com/reinsdev/reins/mcp/cobra"
)

const echoSchema = `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`

func main() {
	if os.Getenv("BENCH_CLI") != "" {
		if err := cliRoot().Execute(); err != nil {
			os.Exit(1)
		}
		return
	}
	serve := flag.String("serve", "", "internal: serve one implementation (reins-direct, reins-compact, go-sdk, mcp-go, reins-cobra)")
	useHTTP := flag.Bool("http", false, "internal: serve streamable HTTP instead of stdio")
	n := flag.Int("n", 3000, "measured calls per configuration")
	cobraN := flag.Int("cobra-n", 300, "measured calls per Cobra configuration (0 skips the Cobra rows)")
	rounds := flag.Int("rounds", 5, "interleaved rounds; each row reports its best round")
	transports := flag.String("transports", "stdio,http", "comma-separated transports to measure")
	flag.Parse()
	if *serve != "" {
		if path := os.Getenv("BENCH_CPUPROFILE"); path != "" {
			f, err := os.Create(path + "." + *serve)
			if err != nil {
				log.Fatal(err)
			}
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
		if err := serveImpl(*serve, *useHTTP); err != nil {
			log.Fatal(err)
		}
		return
	}
	fmt.Printf("mcp-bench: %s %s/%s, GOMAXPROCS=%d, one sequential client; per row the best of %d interleaved rounds of %d calls (after %d warm-up calls)\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *rounds, *n, *n/10)
	type config struct {
		transport, impl string
		call            func() error
		best            stats
	}
	var configs []*config
	for _, transport := range strings.Split(*transports, ",") {
		for _, impl := range []string{"reins-direct", "reins-compact", "go-sdk", "mcp-go"} {
			call, closeFn, err := open(impl, transport == "http")
			if err != nil {
				log.Fatalf("%s/%s: %v", transport, impl, err)
			}
			defer closeFn()
			for range *n / 10 {
				if err := call(); err != nil {
					log.Fatalf("%s/%s: %v", transport, impl, err)
				}
			}
			configs = append(configs, &config{transport: transport, impl: impl, call: call})
		}
	}
	for range *rounds {
		for _, c := range configs {
			st, err := timeCalls(*n, c.call)
			if err != nil {
				log.Fatalf("%s/%s: %v", c.transport, c.impl, err)
			}
			if st.rate > c.best.rate {
				c.best = st
			}
		}
	}
	fmt.Printf("%-8s %-14s %12s %10s %10s\n", "transport", "server", "calls/s", "p50", "p99")
	results := map[string]float64{}
	for _, c := range configs {
		results[c.transport+"/"+c.impl] = c.best.rate
		fmt.Printf("%-8s %-14s %12.0f %10s %10s\n", c.transport, c.impl, c.best.rate, c.best.p50, c.best.p99)
	}
	fmt.Println()
	for _, tr := range strings.Split(*transports, ",") {
		d, g, m := results[tr+"/reins-direct"], results[tr+"/go-sdk"], results[tr+"/mcp-go"]
		fmt.Printf("%-5s reins direct = %.2f× bare go-sdk, %.2f× mcp-go\n", tr, d/g, d/m)
	}
	fmt.Println()
	if *cobraN <= 0 {
		return
	}
	if err := benchCobra(*cobraN, *rounds); err != nil {
		log.Fatal(err)
	}
}

// stats summarise one configuration.
type stats struct {
	rate     float64
	p50, p99 time.Duration
}

func summarise(lat []time.Duration, total time.Duration) stats {
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Microsecond) }
	return stats{rate: float64(len(lat)) / total.Seconds(), p50: q(0.50), p99: q(0.99)}
}

// timeCalls times n sequential calls.
func timeCalls(n int, call func() error) (stats, error) {
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for range n {
		t0 := time.Now()
		if err := call(); err != nil {
			return stats{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	return summarise(lat, time.Since(start)), nil
}

// open starts impl in a child and returns a function making one echo call.
func open(impl string, useHTTP bool) (func() error, func(), error) {
	ctx := context.Background()
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	args := []string{"-serve", impl}
	if useHTTP {
		args = append(args, "-http")
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	var t sdk.Transport
	stop := func() {}
	if useHTTP {
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return nil, nil, err
		}
		stop = func() { stdin.Close(); _ = cmd.Wait() }
		addr, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("reading the child's address: %w", err)
		}
		t = &sdk.StreamableClientTransport{Endpoint: "http://" + strings.TrimSpace(addr) + "/mcp", DisableStandaloneSSE: true}
	} else {
		t = &sdk.CommandTransport{Command: cmd}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, t,
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		stop()
		return nil, nil, err
	}
	params := &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}}
	if impl == "reins-compact" {
		params = &sdk.CallToolParams{Name: "call_tool", Arguments: map[string]any{"name": "echo", "arguments": map[string]any{"text": "hello"}}}
	}
	call := func() error {
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			return err
		}
		if res.IsError || len(res.Content) == 0 || res.Content[0].(*sdk.TextContent).Text != "hello" {
			return fmt.Errorf("unexpected result %+v", res)
		}
		return nil
	}
	return call, func() { cs.Close(); stop() }, nil
}

// serveImpl serves one implementation on stdio, or on a loopback HTTP
// port printed to stdout (until stdin closes).
func serveImpl(impl string, useHTTP bool) error {
	var handler http.Handler
	var stdio func() error
	switch impl {
	case "reins-direct", "reins-compact", "reins-cobra":
		opts := mcp.Options{Name: "bench"}
		if impl != "reins-compact" {
			opts.Mode = mcp.Direct
		}
		srv := mcp.NewServer(opts)
		if impl == "reins-cobra" {
			b, err := cliBinding()
			if err != nil {
				return err
			}
			if err := srv.Add(b.Operations()...); err != nil {
				return err
			}
		} else if err := srv.Add(mcp.Operation{Name: "echo", InputSchema: json.RawMessage(echoSchema),
			Handler: func(_ context.Context, c *mcp.Call) (*mcp.Result, error) {
				var in struct{ Text string }
				if err := json.Unmarshal(c.Arguments, &in); err != nil {
					return nil, err
				}
				return mcp.TextResult(in.Text), nil
			}}); err != nil {
			return err
		}
		handler = srv.HTTPHandler(mcp.HTTPOptions{})
		stdio = func() error { return srv.ServeStdio(context.Background(), os.Stdin, os.Stdout) }
	case "go-sdk":
		// The same flavor of server as reins's direct mode: the raw
		// AddTool with a JSON Schema as given, arguments decoded by the
		// handler, and plain JSON responses on stateless HTTP.
		s := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
		s.AddTool(&sdk.Tool{Name: "echo", InputSchema: json.RawMessage(echoSchema)},
			func(_ context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
				var in struct{ Text string }
				if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
					return nil, err
				}
				return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: in.Text}}}, nil
			})
		handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s },
			&sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
		stdio = func() error { return s.Run(context.Background(), &sdk.StdioTransport{}) }
	case "mcp-go":
		s := markserver.NewMCPServer("bench", "1", markserver.WithToolCapabilities(false))
		s.AddTool(mark.NewTool("echo", mark.WithString("text", mark.Required())),
			func(_ context.Context, r mark.CallToolRequest) (*mark.CallToolResult, error) {
				text, err := r.RequireString("text")
				if err != nil {
					return mark.NewToolResultError(err.Error()), nil
				}
				return mark.NewToolResultText(text), nil
			})
		handler = markserver.NewStreamableHTTPServer(s, markserver.WithStateLess(true))
		stdio = func() error { return markserver.ServeStdio(s) }
	default:
		return fmt.Errorf("unknown implementation %q", impl)
	}
	if !useHTTP {
		return stdio()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", handler)
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Println(ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // serve until the parent closes stdin
	return nil
}

// cliRoot is the tiny CLI the Cobra rows run.
func cliRoot() *cc.Command {
	root := &cc.Command{Use: "benchcli"}
	root.AddCommand(&cc.Command{Use: "echo", Run: func(cmd *cc.Command, args []string) {
		fmt.Fprintln(cmd.OutOrStdout(), strings.Join(args, " "))
	}})
	return root
}

func cliBinding() (*mcpcobra.Binding, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return mcpcobra.New(cliRoot(), mcpcobra.Options{Executable: self, Env: append(os.Environ(), "BENCH_CLI=1")})
}

// benchCobra compares exec'ing the CLI directly with running the same
// command through the binding's handler and through a reins stdio server.
func benchCobra(n, rounds int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	env := append(os.Environ(), "BENCH_CLI=1")
	direct := func() error {
		c := exec.Command(self, "echo", "--", "hello")
		c.Env = env
		out, err := c.Output()
		if err == nil && strings.TrimSpace(string(out)) != "hello" {
			err = fmt.Errorf("output %q", out)
		}
		return err
	}
	b, err := cliBinding()
	if err != nil {
		return err
	}
	op := b.Operations()[0]
	args := json.RawMessage(`{"args":["hello"]}`)
	handler := func() error {
		res, err := op.Handler(context.Background(), &mcp.Call{Operation: op.Name, Arguments: args})
		if err == nil && res == nil {
			err = fmt.Errorf("no result")
		}
		return err
	}
	cmd := exec.Command(self, "-serve", "reins-cobra")
	cmd.Stderr = os.Stderr
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(context.Background(),
		&sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return err
	}
	defer cs.Close()
	full := func() error {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "benchcli_echo", Arguments: map[string]any{"args": []string{"hello"}}})
		if err == nil && res.IsError {
			err = fmt.Errorf("failed: %+v", res.StructuredContent)
		}
		return err
	}
	rows := []struct {
		name string
		f    func() error
		best stats
	}{{"exec the binary directly", direct, stats{}}, {"binding handler (slots, pgroup, capture)", handler, stats{}},
		{"tools/call over stdio (reins direct)", full, stats{}}}
	for i := range rows {
		for range n / 10 {
			if err := rows[i].f(); err != nil {
				return err
			}
		}
	}
	for range rounds {
		for i := range rows {
			st, err := timeCalls(n, rows[i].f)
			if err != nil {
				return err
			}
			if st.rate > rows[i].best.rate {
				rows[i].best = st
			}
		}
	}
	fmt.Printf("Cobra binding (command: benchcli echo -- hello), best of %d interleaved rounds of %d calls\n", rounds, n)
	fmt.Printf("%-44s %10s %10s %10s\n", "path", "calls/s", "p50", "p99")
	for _, r := range rows {
		fmt.Printf("%-44s %10.0f %10s %10s\n", r.name, r.best.rate, r.best.p50, r.best.p99)
	}
	fmt.Printf("binding overhead per call (p50 minus direct exec p50): %+v handler only, %+v as an MCP tools/call over stdio\n",
		(rows[1].best.p50 - rows[0].best.p50).Round(time.Microsecond), (rows[2].best.p50 - rows[0].best.p50).Round(time.Microsecond))
	return nil
}
