// Package telemetry builds taskd's OpenTelemetry providers from typed
// configuration and instruments the clients the dispatcher runs on.
//
// Setup returns a tracer provider (exporting over OTLP/gRPC, OTLP/HTTP or to
// stdout, or a no-op), a meter provider read by the OpenTelemetry Prometheus
// exporter, the handler that serves that exposition, and a Shutdown that
// flushes both. Nothing here touches the OpenTelemetry globals: the providers
// are passed explicitly to dispatcher.Config and to the helpers below, which
// add instrumentation as hooks and wrappers, never inside the core logic:
//
//   - InstrumentRedis adds go-redis redisotel tracing and metrics hooks;
//   - OpenMySQL opens the store's database through an otelsql-wrapped
//     store.Connector;
//   - HTTPHandler wraps the API in otelhttp server spans named after the
//     route pattern;
//   - ObservePool reports the pool's size by status and category from a
//     cached tasks.PoolStats;
//   - LogHandler wraps a slog.Handler so that records logged inside a
//     traced request or task carry trace_id and span_id.
//
// The Redis and MySQL client spans are made only under a recording span:
// connection housekeeping and calls outside any traced operation (idle
// polls, pool statistics) make no traces of their own.
//
// With Config.KeepFailed, traces that fail or are refused are exported
// whatever the sample ratio: the others are recorded and held until their
// local root ends, then dropped (see NewTracerProvider, which builds the
// tracer provider Setup uses).
//
// Task, editor and holder ids go on spans only; no metric of this package or
// of the dispatcher carries them as labels.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// instrumentationName names the tracer and meter of this package.
const instrumentationName = "github.com/taskd/taskd/internal/telemetry"

// Span exporters, the values of Config.Traces.
const (
	TracesNone     = "none"
	TracesStdout   = "stdout"
	TracesOTLPGRPC = "otlp-grpc"
	TracesOTLPHTTP = "otlp-http"
)

// Config defaults.
const (
	TracesDefault      = TracesNone
	ServiceNameDefault = "taskd"
)

// otlpHTTPPath is the path OTLP/HTTP receivers take traces on.
const otlpHTTPPath = "/v1/traces"

// Config configures Setup. The zero value is valid: no spans, no metrics.
type Config struct {
	// Traces is the span exporter: TracesNone, TracesStdout, TracesOTLPGRPC
	// or TracesOTLPHTTP. Default TracesDefault.
	Traces string

	// Endpoint is the OTLP receiver: host:port, or a URL. A URL's scheme
	// decides transport security (http is plaintext, https is TLS); for
	// otlp-http, a URL without a path gets "/v1/traces", and any other path
	// is used as is. Empty means the exporter's own default, which honours
	// the OTEL_EXPORTER_OTLP_* environment variables (localhost:4317 for
	// gRPC, localhost:4318 for HTTP).
	Endpoint string

	// Insecure sends OTLP in plaintext when Endpoint is not a URL. Without
	// it, a host:port endpoint is dialled with TLS.
	Insecure bool

	// ServiceName is the service.name resource attribute. Default
	// ServiceNameDefault.
	ServiceName string

	// ServiceVersion is the service.version resource attribute. Default: the
	// main module's version from the build information, left out when the
	// binary was built without one.
	ServiceVersion string

	// SampleRatio is the fraction of new traces sampled, 0..1. Sampling is
	// parent-based: a span whose parent was sampled (or not) follows its
	// parent, whatever the ratio (but see KeepFailed). The zero value
	// samples no new traces; set 1 to sample every trace.
	SampleRatio float64

	// KeepFailed exports the traces that failed whatever SampleRatio says:
	// a trace the ratio did not choose (and one under a remote parent that
	// was not sampled) is recorded all the same, its ended spans held in
	// memory until its local root ends, then exported whole if one of its
	// spans failed (status Error; a span whose taskd.outcome is refused,
	// error, submit_failed or lease_lost, such as a lost claim's 409; an
	// HTTP server span answering 5xx, or 4xx other than 404) and dropped
	// otherwise. The cost is recording every span of every trace; at most
	// KeepFailedMaxTraces traces of KeepFailedMaxSpans spans are held. The
	// zero value samples by SampleRatio alone, recording nothing else; the
	// engine's config.yaml default is true.
	KeepFailed bool

	// Prometheus enables metrics: a meter provider read by the
	// OpenTelemetry Prometheus exporter, and Providers.Metrics to serve the
	// exposition. Without it the meter provider is a no-op.
	Prometheus bool

	// Stdout receives the spans of TracesStdout, one JSON object each.
	// Default os.Stdout.
	Stdout io.Writer
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.Traces == "" {
		c.Traces = TracesDefault
	}
	if c.ServiceName == "" {
		c.ServiceName = ServiceNameDefault
	}
	if c.ServiceVersion == "" {
		if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
			c.ServiceVersion = info.Main.Version
		}
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	return c
}

func (c Config) validate() error {
	switch c.Traces {
	case TracesNone, TracesStdout, TracesOTLPGRPC, TracesOTLPHTTP:
	default:
		return fmt.Errorf("traces must be %s, %s, %s or %s, got %q",
			TracesNone, TracesStdout, TracesOTLPGRPC, TracesOTLPHTTP, c.Traces)
	}
	if math.IsNaN(c.SampleRatio) || c.SampleRatio < 0 || c.SampleRatio > 1 {
		return fmt.Errorf("sample ratio must be 0..1, got %v", c.SampleRatio)
	}
	// Only the OTLP exporters use Endpoint: with another, whatever it says
	// is not read (as the engine's telemetry.endpoint).
	otlp := c.Traces == TracesOTLPGRPC || c.Traces == TracesOTLPHTTP
	if otlp && strings.Contains(c.Endpoint, "://") {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("endpoint must be host:port or an http(s) URL, got %q", c.Endpoint)
		}
	}
	return nil
}

// Providers are the process's OpenTelemetry providers. Pass TracerProvider
// and MeterProvider to dispatcher.Config, and the Providers to the helpers
// of this package.
type Providers struct {
	// TracerProvider creates spans; a no-op when Config.Traces is
	// TracesNone.
	TracerProvider trace.TracerProvider

	// MeterProvider creates instruments; a no-op unless Config.Prometheus.
	MeterProvider metric.MeterProvider

	// Propagator reads and writes W3C trace context on HTTP requests.
	// HTTPHandler uses it; Setup does not install it globally (the binary
	// may, with otel.SetTextMapPropagator, for libraries that only read the
	// global one).
	Propagator propagation.TextMapPropagator

	// Metrics serves the Prometheus exposition of MeterProvider's metrics,
	// with the Go runtime and process collectors, from a registry of its own
	// (never prometheus.DefaultRegisterer). A scraper that accepts
	// OpenMetrics (application/openmetrics-text, as Prometheus does) gets
	// it, with exemplars on the histograms: the trace_id and span_id of a
	// measurement made under a sampled span; any other gets the text
	// format, without exemplars. Nil unless Config.Prometheus.
	Metrics http.Handler

	// Shutdown flushes buffered spans and stops the exporters. Call it once,
	// at exit; spans and metrics recorded afterwards are dropped.
	Shutdown func(context.Context) error
}

// Setup builds the providers cfg asks for. Exporters connect lazily: an OTLP
// receiver that is down costs dropped spans (reported through the
// OpenTelemetry error handler), not a failed start.
func Setup(ctx context.Context, cfg Config) (*Providers, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	p := &Providers{
		TracerProvider: tracenoop.NewTracerProvider(),
		MeterProvider:  metricnoop.NewMeterProvider(),
		Propagator:     propagation.TraceContext{},
	}
	if cfg.Traces == TracesNone && !cfg.Prometheus {
		p.Shutdown = func(context.Context) error { return nil }
		return p, nil
	}

	res, err := newResource(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	var shutdowns []func(context.Context) error
	if cfg.Traces != TracesNone {
		exp, err := newSpanExporter(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s exporter: %w", cfg.Traces, err)
		}
		tp := NewTracerProvider(exp, cfg, sdktrace.WithResource(res))
		p.TracerProvider = tp
		shutdowns = append(shutdowns, tp.Shutdown)
	}
	if cfg.Prometheus {
		reg := prometheus.NewRegistry()
		if err := reg.Register(collectors.NewGoCollector()); err != nil {
			return nil, errors.Join(fmt.Errorf("telemetry: go collector: %w", err), shutdownAll(ctx, shutdowns))
		}
		if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, errors.Join(fmt.Errorf("telemetry: process collector: %w", err), shutdownAll(ctx, shutdowns))
		}
		exp, err := otelprom.New(
			otelprom.WithRegisterer(reg),
			otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithSuffixes),
		)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("telemetry: prometheus exporter: %w", err), shutdownAll(ctx, shutdowns))
		}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(exp),
			sdkmetric.WithView(httpServerView))
		p.MeterProvider = mp
		// OpenMetrics, to a scraper that asks for it, carries the
		// histograms' exemplars: the trace and span ids of a measurement
		// made under a sampled span (the SDK's default, trace-based,
		// exemplar filter). Other scrapers get the text format, without
		// them.
		p.Metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
		shutdowns = append(shutdowns, mp.Shutdown)
	}
	p.Shutdown = func(ctx context.Context) error {
		if err := shutdownAll(ctx, shutdowns); err != nil {
			return fmt.Errorf("telemetry: shutdown: %w", err)
		}
		return nil
	}
	return p, nil
}

// httpServerView drops server.address and server.port from otelhttp's
// metrics: otelhttp takes them from the request's Host header, which the
// client chooses, so as labels they would let any client mint series. The
// SDK would keep the dropped attributes on exemplars; they are dropped there
// too, since a long Host would push an exemplar past OpenMetrics' 128
// characters of labels and the exporter would leave it out.
var httpServerView = sdkmetric.NewView(
	sdkmetric.Instrument{Scope: instrumentation.Scope{Name: otelhttp.ScopeName}},
	sdkmetric.Stream{
		AttributeFilter: attribute.NewDenyKeysFilter(semconv.ServerAddressKey, semconv.ServerPortKey),
		ExemplarReservoirProviderSelector: func(agg sdkmetric.Aggregation) exemplar.ReservoirProvider {
			provider := sdkmetric.DefaultExemplarReservoirProviderSelector(agg)
			return func(attrs attribute.Set) exemplar.Reservoir { return idsOnly{provider(attrs)} }
		},
	},
)

// idsOnly is an exemplar reservoir that keeps no attributes on its
// exemplars: only the trace and span ids, value and time.
type idsOnly struct{ exemplar.Reservoir }

// Offer offers the measurement to the reservoir without its dropped
// attributes.
func (r idsOnly) Offer(ctx context.Context, t time.Time, val exemplar.Value, _ []attribute.KeyValue) {
	r.Reservoir.Offer(ctx, t, val, nil)
}

// shutdownAll runs every shutdown and joins their errors.
func shutdownAll(ctx context.Context, shutdowns []func(context.Context) error) error {
	var errs []error
	for _, f := range shutdowns {
		errs = append(errs, f(ctx))
	}
	return errors.Join(errs...)
}

// newResource describes the process: service name and version, the SDK, and
// the host.
func newResource(ctx context.Context, cfg Config) (*resource.Resource, error) {
	attrs := []resource.Option{
		resource.WithAttributes(semconv.ServiceName(cfg.ServiceName)),
		resource.WithTelemetrySDK(),
		resource.WithHost(),
	}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, resource.WithAttributes(semconv.ServiceVersion(cfg.ServiceVersion)))
	}
	res, err := resource.New(ctx, attrs...)
	if err != nil {
		return nil, fmt.Errorf("resource: %w", err)
	}
	return res, nil
}

// newSpanExporter builds the exporter of cfg.Traces, which is not
// TracesNone.
func newSpanExporter(ctx context.Context, cfg Config) (sdktrace.SpanExporter, error) {
	isURL := strings.Contains(cfg.Endpoint, "://")
	switch cfg.Traces {
	case TracesStdout:
		return stdouttrace.New(stdouttrace.WithWriter(cfg.Stdout))
	case TracesOTLPGRPC:
		var opts []otlptracegrpc.Option
		switch {
		case isURL:
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		case cfg.Endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure && !isURL {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		return otlptracegrpc.New(ctx, opts...)
	default: // TracesOTLPHTTP
		var opts []otlptracehttp.Option
		switch {
		case isURL:
			u, _ := url.Parse(cfg.Endpoint) // checked by validate
			if u.Path == "" || u.Path == "/" {
				u.Path = otlpHTTPPath
			}
			opts = append(opts, otlptracehttp.WithEndpointURL(u.String()))
		case cfg.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(cfg.Endpoint))
		}
		if cfg.Insecure && !isURL {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		return otlptracehttp.New(ctx, opts...)
	}
}

// tracing reports whether tp records spans: it is set and not a no-op.
func tracing(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case nil, tracenoop.TracerProvider:
		return false
	}
	return true
}

// metering reports whether mp records metrics: it is set and not a no-op.
func metering(mp metric.MeterProvider) bool {
	switch mp.(type) {
	case nil, metricnoop.MeterProvider:
		return false
	}
	return true
}

// errNilProviders is returned by the helpers when given no Providers.
var errNilProviders = errors.New("nil providers")
