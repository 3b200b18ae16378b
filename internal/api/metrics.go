package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// MetricsHandler returns metrics guarded by token: with a token, a request
// needs "Authorization: Bearer <token>" and is answered 401 without it, as
// the API answers (a JSON error, WWW-Authenticate); with "", metrics as they
// are. The token is compared in constant time. The API serves GET /metrics
// through it (Config.MetricsToken); use it for a listener of metrics of
// your own.
func MetricsHandler(metrics http.Handler, token string) http.Handler {
	if token == "" {
		return metrics
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="taskd metrics"`)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"GET /metrics needs the metrics token"}}` + "\n"))
			return
		}
		metrics.ServeHTTP(w, r)
	})
}
