package telemetry

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strconv"

	"github.com/XSAM/otelsql"
	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/taskd/taskd/internal/store"
)

// OpenMySQL opens the task store's database like store.Open, through an
// otelsql wrapper around store.Connector(dsn): a client span per statement,
// transaction and connection, children of the span in the call's context and
// only when that span is recording (a call outside any traced operation, as
// an idle poll or a connection opened for the pool, makes no trace),
// the db.client.operation.duration histogram, and the database/sql pool
// statistics.
//
// Spans carry the statement text with its placeholders, db.system.name
// "mysql", db.namespace and server.address/server.port; never the
// statement's arguments (store.Connector interpolates them inside the
// driver, below the wrapper) and never the DSN, which holds a password.
// Rows, pings and session resets get no spans of their own. With no-op
// providers it is store.Open.
//
// The pool statistics stay registered on the meter provider until it shuts
// down, also after the handle is closed.
func OpenMySQL(ctx context.Context, dsn string, p *Providers) (*sqlx.DB, error) {
	if p == nil {
		return nil, fmt.Errorf("open database: %w", errNilProviders)
	}
	connector, err := store.Connector(dsn)
	if err != nil {
		return nil, err
	}
	if !tracing(p.TracerProvider) && !metering(p.MeterProvider) {
		return store.OpenDB(ctx, sql.OpenDB(connector))
	}
	cfg, err := mysql.ParseDSN(dsn) // cannot fail: Connector parsed it
	if err != nil {
		return nil, fmt.Errorf("open database: parse dsn: %w", err)
	}
	opts := []otelsql.Option{
		otelsql.WithTracerProvider(childrenOnly(p.TracerProvider)),
		otelsql.WithMeterProvider(p.MeterProvider),
		otelsql.WithAttributes(mysqlAttrs(cfg)...),
		otelsql.WithSpanOptions(otelsql.SpanOptions{
			OmitConnResetSession: true,
			OmitRows:             true,
			DisableErrSkip:       true,
		}),
	}
	db, err := store.OpenDB(ctx, otelsql.OpenDB(connector, opts...))
	if err != nil {
		return nil, err
	}
	if metering(p.MeterProvider) {
		if _, err := otelsql.RegisterDBStatsMetrics(db.DB, opts...); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("open database: pool metrics: %w", err)
		}
	}
	return db, nil
}

// mysqlAttrs describes the database of cfg on spans and metrics. It reads the
// parsed DSN, never the DSN text, so no part of a password can leak.
func mysqlAttrs(cfg *mysql.Config) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.DBSystemNameMySQL}
	if cfg.DBName != "" {
		attrs = append(attrs, semconv.DBNamespace(cfg.DBName))
	}
	if cfg.Net == "unix" {
		return append(attrs, semconv.ServerAddress(cfg.Addr))
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return append(attrs, semconv.ServerAddress(cfg.Addr))
	}
	attrs = append(attrs, semconv.ServerAddress(host))
	if n, err := strconv.Atoi(port); err == nil {
		attrs = append(attrs, semconv.ServerPort(n))
	}
	return attrs
}
