package telemetry

import (
	"fmt"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
)

// InstrumentRedis adds go-redis redisotel hooks to rdb: a client span per
// command or pipeline (named after the command, with the command line as
// db.statement, AUTH and HELLO AUTH left out), and the client's command
// durations and connection pool statistics as metrics. Spans are children of
// the span in the command's context, so the lock round trips of a claim show
// under its dispatcher.claim span, and made only when that span is recording:
// a command, dial or HELLO outside any traced operation makes no trace of its
// own. Keys carry task ids and lock values carry
// holders, which is fine on spans; the metrics carry neither.
//
// Call it before rdb's first command: a Cluster client instruments its nodes
// as it discovers them. For Redlock, instrument every master. With no-op
// providers it adds nothing. It returns an error for a client type redisotel
// does not support (a *redis.Client, *redis.ClusterClient and *redis.Ring
// are).
func InstrumentRedis(rdb redis.UniversalClient, p *Providers) error {
	if p == nil {
		return fmt.Errorf("instrument redis: %w", errNilProviders)
	}
	if tracing(p.TracerProvider) {
		err := redisotel.InstrumentTracing(rdb,
			redisotel.WithTracerProvider(childrenOnly(p.TracerProvider)),
			// The caller's file and line cost a stack walk per command and
			// name go-redis internals more often than not.
			redisotel.WithCallerEnabled(false))
		if err != nil {
			return fmt.Errorf("instrument redis: tracing: %w", err)
		}
	}
	if metering(p.MeterProvider) {
		err := redisotel.InstrumentMetrics(rdb,
			redisotel.WithMeterProvider(p.MeterProvider),
			redisotel.WithSemConvCompliantMetrics(true))
		if err != nil {
			return fmt.Errorf("instrument redis: metrics: %w", err)
		}
	}
	return nil
}
