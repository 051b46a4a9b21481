// Package telemetry holds the server's metrics (Prometheus text format, on
// a registry of their own) and traces (OpenTelemetry over OTLP/HTTP), both
// off unless configured. The parts of the server it measures do not import
// it: the harness reports through harness.Observer, the wake-up relay
// through a lag function, and the gauges are read at scrape time from
// functions the app hands to Watch.
package telemetry

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The metrics' names; the README lists them.
const (
	MetricTurnDuration      = "reins_turn_duration_seconds"
	MetricModelCallDuration = "reins_model_call_duration_seconds"
	MetricToolCallDuration  = "reins_tool_call_duration_seconds"
	MetricSessionErrors     = "reins_session_errors_total"
	MetricLeaseTakeovers    = "reins_lease_takeovers_total"
	MetricNotifyLag         = "reins_notify_lag_seconds"
	MetricToolSlotsWaiting  = "reins_tool_slot_waiting_sessions"
	MetricToolSlotsHeld     = "reins_tool_slots_held"
	MetricSSESubscribers    = "reins_sse_subscribers"
	MetricExecutorConns     = "reins_executor_connections"
	MetricWorkQueueDepth    = "reins_work_queue_depth"
	MetricWorkQueueOldest   = "reins_work_queue_oldest_seconds"
)

// scrapeTimeout bounds one scrape; scrapesAtOnce bounds the scrapes served
// at once (more get 503).
const (
	scrapeTimeout = 10 * time.Second
	scrapesAtOnce = 4
)

// Metrics are the server's metrics, on a registry of their own (never
// Prometheus's global one). The zero value is not usable; call NewMetrics.
type Metrics struct {
	reg           *prometheus.Registry
	turns         *prometheus.HistogramVec
	modelCalls    *prometheus.HistogramVec
	toolCalls     *prometheus.HistogramVec
	sessionErrors *prometheus.CounterVec
	takeovers     prometheus.Counter
	notifyLag     prometheus.Histogram
}

// NewMetrics returns the metrics with their counters at zero, and the Go
// runtime's and the process's own.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		turns: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricTurnDuration,
			Help:    "Turns run on this replica by outcome (a stop reason, interrupted, terminated, or suspended when the runner left mid-turn), from the session going running to its end.",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}}, []string{"outcome"}),
		modelCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricModelCallDuration,
			Help:    "Model call attempts by provider and outcome (ok, error, interrupted, canceled).",
			Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}}, []string{"provider", "outcome"}),
		toolCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricToolCallDuration,
			Help:    "Tool calls the server ran by tool (a built-in tool's name, or mcp) and outcome (ok, error, interrupted, canceled).",
			Buckets: []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300}}, []string{"tool", "outcome"}),
		sessionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricSessionErrors,
			Help: "session.error events by error type and retry status (retrying, exhausted, terminal)."}, []string{"type", "retry_status"}),
		takeovers: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricLeaseTakeovers,
			Help: "Session leases this replica acquired that their owner had not released and had let expire (a replica that died or stalled)."}),
		notifyLag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricNotifyLag,
			Help:    "Delay of the wake-ups received from other replicas through PostgreSQL NOTIFY, from their send to their arrival (by the two replicas' clocks).",
			Buckets: []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5}}),
	}
	m.reg.MustRegister(m.turns, m.modelCalls, m.toolCalls, m.sessionErrors, m.takeovers, m.notifyLag,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format. Errors of a
// scrape go to log.
func (m *Metrics) Handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:            slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		MaxRequestsInFlight: scrapesAtOnce,
		Timeout:             scrapeTimeout,
	})
}

// Sources are the gauges' readings, taken at each scrape. A nil function
// leaves its gauge out.
type Sources struct {
	// ToolSlots returns the tool slots held by cloud sessions and the
	// sessions waiting in rescheduling for one (the queue's depth).
	ToolSlots func() (held, waiting int)
	// SSESubscribers returns the open event streams.
	SSESubscribers func() int
	// ExecutorConnections returns the open executor connections.
	ExecutorConnections func() int
	// WorkQueue returns the self-hosted work queue's depth (items waiting
	// for a pull worker, in every environment: the database's figure, the
	// same on every replica) and the age of the oldest of them (0: none).
	WorkQueue func(ctx context.Context) (depth int, oldest time.Duration, err error)
}

// Watch registers the gauges of s. Call it once per Metrics: a second
// call panics (its gauges are already registered).
func (m *Metrics) Watch(s Sources) {
	var cs []prometheus.Collector
	if f := s.ToolSlots; f != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricToolSlotsWaiting,
				Help: "Cloud sessions waiting in rescheduling for a tool slot of this replica."},
				func() float64 { _, w := f(); return float64(w) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricToolSlotsHeld,
				Help: "Tool slots of this replica held by cloud sessions."},
				func() float64 { h, _ := f(); return float64(h) }))
	}
	if f := s.SSESubscribers; f != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricSSESubscribers,
			Help: "Event streams (SSE) open on this replica."}, func() float64 { return float64(f()) }))
	}
	if f := s.ExecutorConnections; f != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricExecutorConns,
			Help: "Executor connections open on this replica."}, func() float64 { return float64(f()) }))
	}
	if s.WorkQueue != nil {
		cs = append(cs, &workCollector{read: s.WorkQueue,
			depth:  prometheus.NewDesc(MetricWorkQueueDepth, "Work items of self-hosted environments waiting for a pull worker, in the whole database.", nil, nil),
			oldest: prometheus.NewDesc(MetricWorkQueueOldest, "Age of the oldest work item waiting for a pull worker (0 when none is).", nil, nil)})
	}
	m.reg.MustRegister(cs...)
}

// workReadTimeout bounds the database read of the work queue's gauges.
const workReadTimeout = 2 * time.Second

// workCollector reads the work queue's gauges from the database, once per
// scrape; a failed read leaves them out of that scrape.
type workCollector struct {
	read          func(ctx context.Context) (int, time.Duration, error)
	depth, oldest *prometheus.Desc
}

func (c *workCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.oldest
}

func (c *workCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), workReadTimeout)
	defer cancel()
	depth, oldest, err := c.read(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.depth, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(depth))
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds())
}

// Registerer is the registry, for the metrics of the server's parts that
// register their own (webhook deliveries).
func (m *Metrics) Registerer() prometheus.Registerer { return m.reg }

// NotifyLag observes the delay of a wake-up from another replica.
func (m *Metrics) NotifyLag(d time.Duration) {
	m.notifyLag.Observe(max(d, 0).Seconds())
}
