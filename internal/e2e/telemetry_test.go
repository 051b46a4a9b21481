package e2e

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/reinsdev/reins/internal/app"
	"github.com/reinsdev/reins/internal/pgtest"
	"github.com/reinsdev/reins/internal/telemetry"
	ma "github.com/reinsdev/reins/managedagents"
)

// scrape GETs url over HTTP and parses the Prometheus text it answers.
func scrape(t *testing.T, url string) map[string]*metricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// metricFamily is a parsed family.
type metricFamily = dto.MetricFamily

// sample returns the count (histograms), value (counters, gauges) of the
// series of name whose labels include want; ok is false when there is
// none.
func sample(fams map[string]*metricFamily, name string, want map[string]string) (v float64, ok bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
series:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if labels[k] != v {
				continue series
			}
		}
		switch {
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// serveMetrics serves m's /metrics on a loopback listener of its own.
func serveMetrics(t *testing.T, m *telemetry.Metrics) string {
	t.Helper()
	srv := httptest.NewServer(m.Handler(slog.New(slog.DiscardHandler)))
	t.Cleanup(srv.Close)
	return srv.URL + "/metrics"
}

// TestMetrics runs a text turn whose first model call fails once and a
// bash turn, with an event stream open, then scrapes /metrics over HTTP:
// the turns, model calls, tool calls and session errors are counted by
// outcome, and the gauges read the open stream.
func TestMetrics(t *testing.T) {
	m := telemetry.NewMetrics()
	s := startWith(t, options{}, func(c *app.Config) { c.Metrics = m })
	url := serveMetrics(t, m)
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, s.newEnv(t, "cloud").ID)

	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("@fail rate_limited 1\n@text hello"))
	st.until(isIdle)
	s.bashTurn(t, sess.ID, "hi")
	// A turn is observed once its idle status committed, a moment before
	// the stream sees it, and bashTurn's own stream is counted out once
	// the server sees its request end: wait for both.
	var fams map[string]*metricFamily
	deadline := time.Now().Add(5 * time.Second)
	for {
		fams = scrape(t, url)
		turns, _ := sample(fams, telemetry.MetricTurnDuration, map[string]string{"outcome": ma.StopEndTurn})
		subs, _ := sample(fams, telemetry.MetricSSESubscribers, nil)
		if turns == 2 && subs == 1 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{telemetry.MetricTurnDuration, map[string]string{"outcome": ma.StopEndTurn}, 2},
		{telemetry.MetricModelCallDuration, map[string]string{"provider": "scripted", "outcome": "error"}, 1},
		{telemetry.MetricModelCallDuration, map[string]string{"provider": "scripted", "outcome": "ok"}, 3},
		{telemetry.MetricToolCallDuration, map[string]string{"tool": "bash", "outcome": "ok"}, 1},
		{telemetry.MetricSessionErrors, map[string]string{"type": ma.ErrorModelRateLimited, "retry_status": ma.RetryRetrying}, 1},
		{telemetry.MetricSSESubscribers, nil, 1},
		{telemetry.MetricToolSlotsWaiting, nil, 0},
		{telemetry.MetricToolSlotsHeld, nil, 1},
		{telemetry.MetricLeaseTakeovers, nil, 0},
	} {
		if got, ok := sample(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if _, ok := sample(fams, telemetry.MetricExecutorConns, nil); !ok {
		t.Errorf("no %s", telemetry.MetricExecutorConns)
	}
	if n, ok := sample(fams, telemetry.MetricWorkQueueDepth, nil); !ok || n != 0 {
		t.Errorf("%s = %v (present %v) before any self-hosted session", telemetry.MetricWorkQueueDepth, n, ok)
	}
	st.cancel()
	waitUntil(t, "the stream's end counted", func() bool {
		n, _ := sample(scrape(t, url), telemetry.MetricSSESubscribers, nil)
		return n == 0
	})
	// A self-hosted session without a worker queues a work item.
	envID, _ := s.selfHosted(t, "queue")
	s.newSession(t, a.ID, envID)
	waitUntil(t, "the work item counted", func() bool {
		fams := scrape(t, url)
		n, _ := sample(fams, telemetry.MetricWorkQueueDepth, nil)
		_, aged := sample(fams, telemetry.MetricWorkQueueOldest, nil)
		return n == 1 && aged
	})
}

// TestMetricsNotifyLag: on PostgreSQL, a replica that receives another
// replica's wake-ups observes their delay.
func TestMetricsNotifyLag(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	a := startWith(t, options{}, func(c *app.Config) { c.DatabaseURL, c.ReplicaID, c.LeaseTTL = dsn, "a", replicaTTL })
	m := telemetry.NewMetrics()
	startWith(t, options{}, func(c *app.Config) { c.DatabaseURL, c.ReplicaID, c.LeaseTTL, c.Metrics = dsn, "b", replicaTTL, m })
	url := serveMetrics(t, m)
	ag := a.newAgent(t, "scripted")
	sess := a.newSession(t, ag.ID, a.newEnv(t, "cloud").ID)
	st := a.openStream(t, sess.ID)
	a.send(t, sess.ID, userMessage("hello"))
	st.until(isIdle)
	waitUntil(t, "b's lag observations", func() bool {
		n, ok := sample(scrape(t, url), telemetry.MetricNotifyLag, nil)
		return ok && n > 0
	})
}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// otlpReceiver is an OTLP/HTTP trace collector on loopback: it decodes
// the protobuf export requests and keeps their spans.
type otlpReceiver struct {
	srv   *httptest.Server
	mu    sync.Mutex
	spans []*tracepb.Span
	res   map[string]string // the resource's string attributes
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	rc := &otlpReceiver{res: map[string]string{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("OTLP request %s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "unexpected", http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if err != nil {
			t.Errorf("OTLP request: %v", err)
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				rc.res[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				rc.spans = append(rc.spans, ss.GetSpans()...)
			}
		}
		rc.mu.Unlock()
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// attr returns a span's string attribute.
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.GetAttributes() {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestTraces runs a bash turn with traces sent to an OTLP/HTTP receiver,
// then shuts the server down: by the end of the shutdown (which flushes
// them; the exporter's batch delay is 5 s) the receiver has the turn's
// span with, below it, the two model calls, and below the first one the
// bash call, each with the session id, all with the replica as
// service.instance.id.
func TestTraces(t *testing.T) {
	rc := newOTLPReceiver(t)
	s, shutdown := startStoppable(t, options{}, func(c *app.Config) {
		c.Tracing = &telemetry.TracingConfig{Endpoint: rc.srv.URL}
		c.ReplicaID = "replica-t"
	})
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, s.newEnv(t, "cloud").ID)
	s.bashTurn(t, sess.ID, "hi")
	shutdown()

	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.res["service.name"] != "reins" || rc.res["service.instance.id"] != "replica-t" {
		t.Errorf("resource %v, want service.name reins, service.instance.id replica-t", rc.res)
	}
	byName := map[string][]*tracepb.Span{}
	for _, sp := range rc.spans {
		byName[sp.GetName()] = append(byName[sp.GetName()], sp)
		if got := attr(sp, telemetry.AttrSessionID); got != sess.ID {
			t.Errorf("span %s: session id %q, want %q", sp.GetName(), got, sess.ID)
		}
	}
	turns, calls, tools := byName[telemetry.SpanTurn], byName[telemetry.SpanModelCall], byName[telemetry.SpanToolCall]
	if len(turns) != 1 || len(calls) != 2 || len(tools) != 1 {
		t.Fatalf("spans: %d turns, %d model calls, %d tool calls; want 1, 2, 1", len(turns), len(calls), len(tools))
	}
	turn := turns[0]
	if attr(turn, telemetry.AttrOutcome) != ma.StopEndTurn || len(turn.GetParentSpanId()) != 0 {
		t.Errorf("turn span: outcome %q, parent %x", attr(turn, telemetry.AttrOutcome), turn.GetParentSpanId())
	}
	for _, c := range calls {
		if string(c.GetParentSpanId()) != string(turn.GetSpanId()) || string(c.GetTraceId()) != string(turn.GetTraceId()) {
			t.Errorf("model call span not a child of the turn's")
		}
		if attr(c, telemetry.AttrModel) != "scripted" || attr(c, telemetry.AttrProvider) != "scripted" || attr(c, telemetry.AttrOutcome) != "ok" {
			t.Errorf("model call span attributes %v", c.GetAttributes())
		}
	}
	first := calls[0]
	if calls[1].GetStartTimeUnixNano() < first.GetStartTimeUnixNano() {
		first = calls[1]
	}
	tool := tools[0]
	if string(tool.GetParentSpanId()) != string(first.GetSpanId()) || string(tool.GetTraceId()) != string(turn.GetTraceId()) {
		t.Errorf("tool call span not a child of the first model call's")
	}
	if attr(tool, telemetry.AttrTool) != "bash" || attr(tool, telemetry.AttrOutcome) != "ok" {
		t.Errorf("tool call span attributes %v", tool.GetAttributes())
	}
}

// TestTelemetryOffByDefault: a server configured without metrics or
// traces sends no span, even with OTEL_EXPORTER_OTLP_ENDPOINT naming a
// collector (the exporter reads it: only `reins serve` turns traces on
// from it), and serves no /metrics on the API's address.
func TestTelemetryOffByDefault(t *testing.T) {
	rc := newOTLPReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rc.srv.URL)
	s, shutdown := startStoppable(t, options{}, nil)
	a := s.newAgent(t, "scripted", toolset(false))
	sess := s.newSession(t, a.ID, s.newEnv(t, "cloud").ID)
	s.bashTurn(t, sess.ID, "hi")
	req, _ := http.NewRequest(http.MethodGet, s.url+"/metrics", nil)
	req.Header.Set("x-api-key", s.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics on the API: %s, want 404", resp.Status)
	}
	shutdown()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.spans) != 0 {
		t.Errorf("%d spans sent", len(rc.spans))
	}
}

// lockedBuffer is a bytes.Buffer safe for concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLogsCarryReplica: on PostgreSQL, the server's log lines (the
// runners', here) carry the replica id.
func TestLogsCarryReplica(t *testing.T) {
	dsn := pgtest.FreshDB(t)
	var logs lockedBuffer
	s := startWith(t, options{}, func(c *app.Config) {
		c.DatabaseURL, c.ReplicaID, c.LeaseTTL = dsn, "replica-l", replicaTTL
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	a := s.newAgent(t, "scripted")
	sess := s.newSession(t, a.ID, s.newEnv(t, "cloud").ID)
	st := s.openStream(t, sess.ID)
	s.send(t, sess.ID, userMessage("hello"))
	st.until(isIdle)
	n := 0
	for line := range strings.Lines(logs.String()) {
		if !strings.Contains(line, "session="+sess.ID) {
			continue
		}
		n++
		if !strings.Contains(line, "replica=replica-l") {
			t.Errorf("log line without the replica: %s", line)
		}
	}
	if n == 0 {
		t.Fatalf("no log line about the session:\n%s", logs.String())
	}
}
