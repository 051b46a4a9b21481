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
	fmt.Printf("mcp-bench: %s %s/%s, GOMAXPROCS=%d, %d calls per row after %d warm-up calls, one sequential client\n\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), *n, *n/10)
	fmt.Printf("%-8s %-14s %12s %10s %10s\n", "transport", "server", "calls/s", "p50", "p99")
	results := map[string]float64{}
	for _, transport := range strings.Split(*transports, ",") {
		for _, impl := range []string{"reins-direct", "reins-compact", "go-sdk", "mcp-go"} {
			st, err := measure(impl, transport == "http", *n)
			if err != nil {
				log.Fatalf("%s/%s: %v", transport, impl, err)
			}
			results[transport+"/"+impl] = st.rate
			fmt.Printf("%-8s %-14s %12.0f %10s %10s\n", transport, impl, st.rate, st.p50, st.p99)
		}
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
	if err := benchCobra(*cobraN); err != nil {
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

// measure starts impl in a child and times n echo calls.
func measure(impl string, useHTTP bool, n int) (stats, error) {
	ctx := context.Background()
	self, err := os.Executable()
	if err != nil {
		return stats{}, err
	}
	args := []string{"-serve", impl}
	if useHTTP {
		args = append(args, "-http")
	}
	cmd := exec.Command(self, args...)
	cmd.Stderr = os.Stderr
	var t sdk.Transport
	if useHTTP {
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return stats{}, err
		}
		defer func() { stdin.Close(); _ = cmd.Wait() }()
		addr, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			return stats{}, fmt.Errorf("reading the child's address: %w", err)
		}
		t = &sdk.StreamableClientTransport{Endpoint: "http://" + strings.TrimSpace(addr) + "/mcp", DisableStandaloneSSE: true}
	} else {
		t = &sdk.CommandTransport{Command: cmd}
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx, t,
		&sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		return stats{}, err
	}
	defer cs.Close()
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
	for range n / 10 {
		if err := call(); err != nil {
			return stats{}, err
		}
	}
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
		s := sdk.NewServer(&sdk.Implementation{Name: "bench", Version: "1"}, nil)
		type in struct {
			Text string `json:"text"`
		}
		sdk.AddTool(s, &sdk.Tool{Name: "echo"}, func(_ context.Context, _ *sdk.CallToolRequest, a in) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: a.Text}}}, nil, nil
		})
		handler = sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: true})
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
func benchCobra(n int) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	env := append(os.Environ(), "BENCH_CLI=1")
	timeIt := func(f func() error) (stats, error) {
		for range n / 10 {
			if err := f(); err != nil {
				return stats{}, err
			}
		}
		lat := make([]time.Duration, 0, n)
		start := time.Now()
		for range n {
			t0 := time.Now()
			if err := f(); err != nil {
				return stats{}, err
			}
			lat = append(lat, time.Since(t0))
		}
		return summarise(lat, time.Since(start)), nil
	}
	direct, err := timeIt(func() error {
		c := exec.Command(self, "echo", "--", "hello")
		c.Env = env
		out, err := c.Output()
		if err == nil && strings.TrimSpace(string(out)) != "hello" {
			err = fmt.Errorf("output %q", out)
		}
		return err
	})
	if err != nil {
		return err
	}
	b, err := cliBinding()
	if err != nil {
		return err
	}
	op := b.Operations()[0]
	args := json.RawMessage(`{"args":["hello"]}`)
	handler, err := timeIt(func() error {
		res, err := op.Handler(context.Background(), &mcp.Call{Operation: op.Name, Arguments: args})
		if err == nil && res == nil {
			err = fmt.Errorf("no result")
		}
		return err
	})
	if err != nil {
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
	full, err := timeIt(func() error {
		res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "benchcli_echo", Arguments: map[string]any{"args": []string{"hello"}}})
		if err == nil && res.IsError {
			err = fmt.Errorf("failed: %+v", res.StructuredContent)
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("Cobra binding, %d calls per row after %d warm-up calls (command: benchcli echo -- hello)\n", n, n/10)
	fmt.Printf("%-44s %10s %10s %10s\n", "path", "calls/s", "p50", "p99")
	for _, r := range []struct {
		name string
		s    stats
	}{{"exec the binary directly", direct}, {"binding handler (slots, pgroup, capture)", handler}, {"tools/call over stdio (reins direct)", full}} {
		fmt.Printf("%-44s %10.0f %10s %10s\n", r.name, r.s.rate, r.s.p50, r.s.p99)
	}
	fmt.Printf("binding overhead per call: p50 %+v (handler), %+v (full MCP stdio round trip)\n",
		(handler.p50 - direct.p50).Round(time.Microsecond), (full.p50 - direct.p50).Round(time.Microsecond))
	return nil
}
