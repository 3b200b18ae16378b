package taskd_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/testenv"
)

// get sends GET url with a bearer token (none when "") and returns the
// status and body.
func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestMetricsListener: with http.metrics_addr, /metrics is served there and
// not with the API; with http.metrics_token, only to that token.
func TestMetricsListener(t *testing.T) {
	t.Parallel()
	const metricsToken = "metrics-token-0123456789"
	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", MetricsToken: metricsToken},
		AdminToken: testAdminToken,
		Telemetry:  taskd.TelemetryConfig{Prometheus: true},
	})
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	api, metrics := "http://"+e.Addr(), "http://"+e.MetricsAddr()
	if e.MetricsAddr() == "" || e.MetricsAddr() == e.Addr() {
		t.Fatalf("metrics address %q, API %q", e.MetricsAddr(), e.Addr())
	}
	if status, body := get(t, api+"/metrics", metricsToken); status != http.StatusNotFound {
		t.Errorf("GET /metrics on the API's listener: %d, want 404: %s", status, body)
	}
	for _, token := range []string{"", testAdminToken} {
		if status, body := get(t, metrics+"/metrics", token); status != http.StatusUnauthorized || !strings.Contains(body, `"unauthorized"`) {
			t.Errorf("GET /metrics with token %q: %d, want 401: %s", token, status, body)
		}
	}
	if status, body := get(t, metrics+"/metrics", metricsToken); status != http.StatusOK || !strings.Contains(body, "taskd_store_up") {
		t.Errorf("GET /metrics with the metrics token: %d, want 200 with taskd_store_up:\n%.500s", status, body)
	}
	if status, _ := get(t, metrics+"/healthz", ""); status != http.StatusOK {
		t.Errorf("GET /healthz on the metrics listener: %d, want 200", status)
	}
	if status, _ := get(t, api+"/healthz", ""); status != http.StatusOK {
		t.Errorf("GET /healthz on the API's listener: %d, want 200", status)
	}
}

// TestMetricsToken: without a listener of its own, /metrics is served with
// the API, to the metrics token only.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	const metricsToken = "metrics-token-0123456789"
	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0", MetricsToken: metricsToken},
		AdminToken: testAdminToken,
		Telemetry:  taskd.TelemetryConfig{Prometheus: true},
	})
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	api := "http://" + e.Addr()
	if e.MetricsAddr() != "" {
		t.Errorf("a metrics listener without http.metrics_addr: %s", e.MetricsAddr())
	}
	if status, _ := get(t, api+"/metrics", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /metrics without a token: %d, want 401", status)
	}
	if status, body := get(t, api+"/metrics", metricsToken); status != http.StatusOK || !strings.Contains(body, "taskd_store_up") {
		t.Errorf("GET /metrics with the metrics token: %d, want 200 with taskd_store_up", status)
	}
}

// TestTelemetryOptions: an embedder's tracer provider, meter provider and
// /metrics handler replace what Config.Telemetry describes, and stay the
// embedder's after Stop.
func TestTelemetryOptions(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		t.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })

	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		AdminToken: testAdminToken,
		// Not read: the options replace them.
		Telemetry: taskd.TelemetryConfig{Traces: "stdout", SampleRatio: new(1.0), Prometheus: true},
	}, taskd.WithTracerProvider(tp), taskd.WithMeterProvider(mp),
		taskd.WithMetricsHandler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{})))
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + e.Addr()
	if status, body := get(t, base+"/v1/stats", testAdminToken); status != http.StatusOK {
		t.Fatalf("GET /v1/stats: %d: %s", status, body)
	}
	testenv.Eventually(t, 10*time.Second, "a span of GET /v1/stats in the embedder's tracer provider", func() bool {
		for _, s := range spans.Ended() {
			if s.Name() == "GET /v1/stats" {
				return true
			}
		}
		return false
	})
	if status, body := get(t, base+"/metrics", ""); status != http.StatusOK || !strings.Contains(body, "taskd_store_up") {
		t.Errorf("GET /metrics: %d, want 200 with the engine's taskd_store_up from the embedder's registry:\n%.500s", status, body)
	}
	if err := e.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, span := tp.Tracer("test").Start(t.Context(), "after stop")
	if !span.IsRecording() {
		t.Error("Stop shut the embedder's tracer provider down")
	}
	span.End()
}

// TestMetricsHandlerNil: WithMetricsHandler(nil) serves no /metrics, even
// with Config.Telemetry.Prometheus on.
func TestMetricsHandlerNil(t *testing.T) {
	t.Parallel()
	e := newEngine(t, taskd.Config{
		HTTP:      taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		Telemetry: taskd.TelemetryConfig{Prometheus: true},
	}, taskd.WithMetricsHandler(nil))
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status, body := get(t, "http://"+e.Addr()+"/metrics", ""); status != http.StatusNotFound {
		t.Errorf("GET /metrics: %d, want 404: %.300s", status, body)
	}
	if status, _ := get(t, "http://"+e.Addr()+"/healthz", ""); status != http.StatusOK {
		t.Errorf("GET /healthz: %d, want 200", status)
	}
}
