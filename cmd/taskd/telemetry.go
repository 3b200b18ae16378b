package main

import (
	"context"
	"io"
	"log/slog"

	"go.opentelemetry.io/otel"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/telemetry"
)

// newTelemetry builds the providers cfg asks for; the stdout exporter writes
// its spans to stdout. It is the one place where providers are constructed.
// The providers go to the engine (taskd.WithTracerProvider,
// WithMeterProvider, WithMetricsHandler for Metrics, GET /metrics), and
// Shutdown flushes them at exit.
//
// OpenTelemetry's own errors (a collector that cannot be reached, spans
// dropped) are logged at warn level.
func newTelemetry(ctx context.Context, cfg taskd.TelemetryConfig, stdout io.Writer, log *slog.Logger) (*telemetry.Providers, error) {
	p, err := telemetry.Setup(ctx, telemetry.Config{
		Traces:      cfg.Traces,
		Endpoint:    cfg.Endpoint,
		Insecure:    cfg.Insecure,
		ServiceName: cfg.ServiceName,
		SampleRatio: cfg.SampleRatio,
		Prometheus:  cfg.Prometheus,
		Stdout:      stdout,
	})
	if err != nil {
		return nil, err
	}
	// Process-wide, which only main may set.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry", "err", err)
	}))
	if cfg.Traces != telemetry.TracesNone || cfg.Prometheus {
		log.InfoContext(ctx, "telemetry", "traces", cfg.Traces, "endpoint", cfg.Endpoint,
			"sample_ratio", cfg.SampleRatio, "prometheus", cfg.Prometheus)
	}
	return p, nil
}
