package taskd_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/taskd/taskd"
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
