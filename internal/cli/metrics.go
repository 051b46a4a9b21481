package cli

import (
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/reinsdev/reins/internal/telemetry"
)

// serveTelemetry is what --metrics-addr and --otlp-endpoint (or the
// standard OTEL_EXPORTER_OTLP_* variables) turn on; both are off by
// default.
type serveTelemetry struct {
	metrics *telemetry.Metrics
	tracing *telemetry.TracingConfig
	srv     *http.Server // serves /metrics on a listener of its own
	url     string
}

// otelEndpointVars are the OpenTelemetry variables that name where traces
// go; either one turns traces on without --otlp-endpoint.
var otelEndpointVars = []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"}

// startTelemetry checks the telemetry flags, binds the metrics listener and
// starts serving /metrics there. Errors name the flag.
func (o *serveOptions) startTelemetry(logger *slog.Logger) (*serveTelemetry, error) {
	t := &serveTelemetry{}
	switch {
	case o.otlpEndpoint != "":
		if err := telemetry.CheckEndpoint(o.otlpEndpoint); err != nil {
			return nil, flagError(o.flags, "otlp-endpoint", "%v", err)
		}
		t.tracing = &telemetry.TracingConfig{Endpoint: o.otlpEndpoint}
	default:
		for _, v := range otelEndpointVars {
			if os.Getenv(v) != "" {
				t.tracing = &telemetry.TracingConfig{} // the exporter reads the variables
				break
			}
		}
	}
	if o.metricsAddr == "" {
		return t, nil
	}
	ln, err := net.Listen("tcp", o.metricsAddr)
	if err != nil {
		return nil, flagError(o.flags, "metrics-addr", "%v", err)
	}
	t.metrics = telemetry.NewMetrics()
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", t.metrics.Handler(logger))
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	t.url = "http://" + ln.Addr().String() + "/metrics"
	go func() {
		if err := t.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("metrics listener", "err", err)
		}
	}()
	return t, nil
}

// close stops the metrics listener.
func (t *serveTelemetry) close() {
	if t != nil && t.srv != nil {
		t.srv.Close()
	}
}
