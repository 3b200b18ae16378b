package main

import (
	"context"
	"log/slog"
	"net/http"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/cmd/taskd/internal/config"
)

// telemetry is the process's OpenTelemetry: the providers the dispatcher
// reports to, the Prometheus handler for GET /metrics, and the flush at exit.
type telemetry struct {
	// tracerProvider and meterProvider go to dispatcher.Config; nil means the
	// global providers, no-ops unless set.
	tracerProvider trace.TracerProvider
	meterProvider  metric.MeterProvider
	// metrics serves GET /metrics; nil serves nothing.
	metrics http.Handler
	// shutdown flushes and stops the exporters.
	shutdown func(context.Context) error
}

// newTelemetry builds the providers cfg asks for. It is the one place where
// providers are constructed.
//
// The exporters (stdout, OTLP over gRPC or HTTP, Prometheus) are built by
// package dispatcher/telemetry, which does not exist yet; until it does, every
// provider is a no-op and the settings, already validated, are only logged.
func newTelemetry(ctx context.Context, cfg config.Telemetry, log *slog.Logger) (*telemetry, error) {
	if cfg.Traces != config.TracesNone || cfg.Prometheus {
		log.InfoContext(ctx, "telemetry exporters are not built yet; spans and metrics are dropped",
			"traces", cfg.Traces, "prometheus", cfg.Prometheus)
	}
	return &telemetry{shutdown: func(context.Context) error { return nil }}, nil
}
