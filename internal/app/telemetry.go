package app

import (
	"context"
	"time"

	"github.com/reinsdev/reins/internal/harness"
	"github.com/reinsdev/reins/internal/telemetry"
)

// openTelemetry sets up the traces' exporter when cfg asks for traces, and
// returns the harness's observer (nil when neither metrics nor traces are
// on: the harness then observes nothing). instance names this process in
// the traces (service.instance.id).
func openTelemetry(ctx context.Context, cfg Config, instance string) (*telemetry.Tracing, harness.Observer, error) {
	var tr *telemetry.Tracing
	if cfg.Tracing != nil {
		tc := *cfg.Tracing
		tc.InstanceID = instance
		var err error
		if tr, err = telemetry.NewTracing(ctx, tc); err != nil {
			return nil, nil, err
		}
		cfg.Logger.Info("traces go to an OTLP/HTTP collector", "endpoint", tc.Endpoint, "service.instance.id", instance)
	}
	if tr == nil && cfg.Metrics == nil {
		return nil, nil, nil
	}
	return tr, telemetry.NewObserver(cfg.Metrics, tr), nil
}

// watch registers the gauges the metrics read at each scrape.
func (a *App) watch(m *telemetry.Metrics) {
	if m == nil {
		return
	}
	m.Watch(telemetry.Sources{
		ToolSlots:           a.tools.SlotsInUse,
		SSESubscribers:      a.API.Streams,
		ExecutorConnections: a.Hub.Connections,
		WorkQueue:           a.workQueue,
	})
}

// workQueue reads the work queue's depth and the age of its oldest item.
func (a *App) workQueue(ctx context.Context) (int, time.Duration, error) {
	st, err := a.Store.AllWorkStats(ctx)
	if err != nil {
		return 0, 0, err
	}
	var oldest time.Duration
	if st.OldestQueuedAt != nil {
		oldest = max(time.Since(*st.OldestQueuedAt), 0)
	}
	return int(st.Depth), oldest, nil
}

// notifyLag is the relay's report of a wake-up's delay (nil without
// metrics).
func (a *App) notifyLag() func(d time.Duration) {
	if a.metrics == nil {
		return nil
	}
	return a.metrics.NotifyLag
}
