package api_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/taskd/taskd/internal/api"
)

// TestMetricsNeedTheirToken: with Config.MetricsToken, GET /metrics answers
// only that token, with the API's 401 otherwise (the admin's is no metrics
// token).
func TestMetricsNeedTheirToken(t *testing.T) {
	t.Parallel()
	const metricsToken = "metrics-token-0123456789"
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = io.WriteString(w, "taskd_up 1\n")
	})
	b := setup(t, setupOpts{api: api.Config{Metrics: metrics, MetricsToken: metricsToken}})
	b.secret(metricsToken)
	for _, token := range []string{"", adminToken, "wrong-metrics-token-0123"} {
		wantError(t, b.do(t, "GET", "/metrics", token, ""), http.StatusUnauthorized, "unauthorized")
	}
	res := b.do(t, "GET", "/metrics", metricsToken, "")
	if res.status != http.StatusOK || string(res.body) != "taskd_up 1\n" {
		t.Errorf("GET /metrics with its token: %d %s", res.status, res.body)
	}
	// Without a token, metrics are open.
	open := setup(t, setupOpts{api: api.Config{Metrics: metrics}})
	if res := open.do(t, "GET", "/metrics", "", ""); res.status != http.StatusOK {
		t.Errorf("GET /metrics without a metrics token configured: %d", res.status)
	}
}
