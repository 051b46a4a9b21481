// Package e2e drives a real reins server on a loopback port with the
// official Anthropic Go SDK as the client.
package e2e

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	"go.uber.org/goleak"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/httpapi"
	"github.com/reinsdev/reins/internal/model"
	"github.com/reinsdev/reins/internal/tool"
	ma "github.com/reinsdev/reins/managedagents"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
		goleak.IgnoreAnyFunction("database/sql.(*DB).connectionOpener"))
}

type server struct {
	app    *app.App
	url    string
	key    string
	client anthropic.Client
}

type options struct {
	models model.Router
	retry  harness.RetryPolicy
	tools  tool.Runner
	dir    string
}

func start(t *testing.T, o options) *server {
	t.Helper()
	return startWith(t, o, nil)
}

// replicasMasterKey is the master key of the tests' servers on
// PostgreSQL, which must all have the same.
const replicasMasterKey = "replicas-master-key-32-bytes-ok!"

// startWith is start with a hook to adjust the app configuration.
func startWith(t *testing.T, o options, adjust func(*app.Config)) *server {
	t.Helper()
	s, _ := startStoppable(t, o, adjust)
	return s
}

// startStoppable is startWith with a shutdown the test may call (it
// returns once the server stopped); the cleanup calls it otherwise.
func startStoppable(t *testing.T, o options, adjust func(*app.Config)) (*server, func()) {
	t.Helper()
	ctx := context.Background()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.retry.BaseDelay == 0 {
		o.retry = harness.RetryPolicy{MaxAttempts: 3, BaseDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}
	}
	// The tests' MCP servers and token endpoints listen on loopback, which
	// the server refuses unless the operator allows it.
	cfg := app.Config{DataDir: o.dir, Models: o.models, Retry: o.retry, Tools: o.tools,
		HTTP:          httpapi.Config{PingInterval: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond},
		OutboundAllow: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	if adjust != nil {
		adjust(&cfg)
	}
	if cfg.DatabaseURL != "" && cfg.MasterKey == nil {
		cfg.MasterKey = []byte(replicasMasterKey) // replicas share theirs
	}
	a, err := app.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := httpapi.CreateKey(ctx, a.Store, "test")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(ctx, ln); err != nil {
		t.Fatal(err)
	}
	s := &server{app: a, url: "http://" + ln.Addr().String(), key: key}
	// The SDK's connections are the test's own, so that they can be closed
	// before shutdown: http.Server.Shutdown waits up to 5 s for a
	// connection dialed for a burst of requests but never used (StateNew).
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	s.client = anthropic.NewClient(option.WithBaseURL(s.url), option.WithAPIKey(key), option.WithMaxRetries(0), option.WithHTTPClient(hc))
	var once sync.Once
	stop := func() {
		once.Do(func() {
			hc.CloseIdleConnections()
			sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := a.Shutdown(sctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return s, stop
}

func text(s string) []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion {
	return []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: s}}}
}

func userMessage(s string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{Content: text(s)}}
}

// newAgent creates an agent with the given model and tools.
func (s *server) newAgent(t *testing.T, modelID string, tools ...anthropic.BetaAgentNewParamsToolUnion) *anthropic.BetaManagedAgentsAgent {
	t.Helper()
	a, err := s.client.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
		Name:  "test agent",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: modelID},
		Tools: tools,
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func (s *server) newEnv(t *testing.T, name string) *anthropic.BetaEnvironment {
	t.Helper()
	e, err := s.client.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (s *server) newSession(t *testing.T, agentID, envID string) *anthropic.BetaManagedAgentsSession {
	t.Helper()
	sess, err := s.client.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)},
		EnvironmentID: envID,
	})
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

// send posts events and returns the echo.
func (s *server) send(t *testing.T, sessionID string, evs ...anthropic.BetaManagedAgentsEventParamsUnion) []ma.Event {
	t.Helper()
	res, err := s.client.Beta.Sessions.Events.Send(context.Background(), sessionID, anthropic.BetaSessionEventSendParams{Events: evs})
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		Data []ma.Event `json:"data"`
	}
	if err := json.Unmarshal([]byte(res.RawJSON()), &out); err != nil {
		t.Fatal(err)
	}
	return out.Data
}

// stream is an open SDK event stream decoded into wire events.
type stream struct {
	t      *testing.T
	cancel context.CancelFunc
	ch     chan frame
	errc   chan error
}

// frame is a stream frame: a persisted event or a preview.
type frame struct {
	ma.Event
	Started *ma.PreviewEvent `json:"event"`
	EventID string           `json:"event_id"`
	Delta   *ma.PreviewDelta `json:"delta"`
}

// openStream opens the SSE stream with the SDK; events arrive on Next.
func (s *server) openStream(t *testing.T, sessionID string, deltas ...string) *stream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	params := anthropic.BetaSessionEventStreamParams{}
	for _, d := range deltas {
		params.EventDeltas = append(params.EventDeltas, anthropic.BetaManagedAgentsDeltaType(d))
	}
	st := s.client.Beta.Sessions.Events.StreamEvents(ctx, sessionID, params)
	return follow(t, cancel, st, func(ev anthropic.BetaManagedAgentsStreamSessionEventsUnion) string { return ev.Type })
}

// follow decodes the frames of an open SDK stream st, of any of the SDK's
// stream event unions (typ reads a frame's type as the SDK decoded it),
// into a stream; cancel ends it.
func follow[T interface{ RawJSON() string }](t *testing.T, cancel context.CancelFunc, st *ssestream.Stream[T], typ func(T) string) *stream {
	t.Helper()
	out := &stream{t: t, cancel: cancel, ch: make(chan frame, 10000), errc: make(chan error, 1)}
	opened := make(chan struct{})
	go func() {
		defer close(out.ch)
		close(opened)
		for st.Next() {
			cur := st.Current()
			var ev frame
			raw := cur.RawJSON()
			if err := json.Unmarshal([]byte(raw), &ev); err != nil {
				out.errc <- err
				return
			}
			if typ(cur) != ev.Type {
				out.errc <- &decodeMismatch{typ(cur), ev.Type}
				return
			}
			out.ch <- ev
		}
		out.errc <- st.Err()
		st.Close()
	}()
	<-opened
	t.Cleanup(func() {
		cancel()
		for range out.ch {
		}
	})
	// Give the server a moment to register the stream ("live from now").
	time.Sleep(50 * time.Millisecond)
	return out
}

type decodeMismatch struct{ sdk, wire string }

func (d *decodeMismatch) Error() string {
	return "SDK decoded type " + d.sdk + " for a " + d.wire + " frame"
}

// next returns the next event, failing the test after timeout.
func (s *stream) next(timeout time.Duration) frame {
	s.t.Helper()
	select {
	case ev, ok := <-s.ch:
		if !ok {
			s.t.Fatalf("stream ended: %v", <-s.errc)
		}
		return ev
	case <-time.After(timeout):
		s.t.Fatalf("timed out waiting for a stream event")
	}
	return frame{}
}

// until collects events up to and including the first for which stop is
// true.
func (s *stream) until(stop func(frame) bool) []frame {
	s.t.Helper()
	var out []frame
	for {
		ev := s.next(10 * time.Second)
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
}

func isIdle(ev frame) bool { return ev.Type == ma.EventStatusIdle }

func types(evs []frame) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func interruptEvent() anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{}}
}
