package main

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/telemetry"
)

// prepareTelemetry readies the process for the telemetry the engine builds
// from cfg (taskd.Config.Telemetry: the engine is the one place that turns
// it into providers, with the stdout exporter writing to the process's
// stdout, and Stop flushes them). What is process-wide is main's to set:
// OpenTelemetry's own errors (a collector that cannot be reached, spans
// dropped) are logged at warn level. It logs what telemetry is on.
func prepareTelemetry(ctx context.Context, cfg taskd.TelemetryConfig, log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("opentelemetry", "err", err)
	}))
	if cfg.Traces != telemetry.TracesNone || cfg.Prometheus {
		log.InfoContext(ctx, "telemetry", "traces", cfg.Traces, "endpoint", cfg.Endpoint,
			"sample_ratio", *cfg.SampleRatio, "keep_failed", *cfg.KeepFailed, "prometheus", cfg.Prometheus)
	}
}
