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
// are. The token is compared in constant time. Use it for a listener of
// metrics of your own; the API serves GET /metrics (Config.MetricsToken) the
// same way, and counts wrong tokens there against the client's address as
// it counts wrong bearer tokens (see throttle).
func MetricsHandler(metrics http.Handler, token string) http.Handler {
	if token == "" {
		return metrics
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := metricsTokenOf(r, want); !ok {
			writeMetricsUnauthorized(w)
			return
		}
		metrics.ServeHTTP(w, r)
	})
}

// metrics is GET /metrics of the API: MetricsHandler's, whose wrong tokens
// are counted and throttled as wrong bearer tokens are. The right token is
// served whatever its address did; a wrong one from a blocked address is
// answered 429, and one that blocks its address too. A missing token is 401,
// and 429 from a blocked address, but is not counted.
func (a *api) metrics(metrics http.Handler, token string) http.Handler {
	if token == "" {
		return metrics
	}
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		given, ok := metricsTokenOf(r, want)
		if ok {
			metrics.ServeHTTP(w, r)
			return
		}
		if err := a.refuseBlocked(r); err != nil {
			a.writeError(w, r, err)
			return
		}
		if given {
			if err := a.authFailed(r, "wrong_metrics_token", errWrongMetricsToken); err != errWrongMetricsToken {
				a.writeError(w, r, err)
				return
			}
		}
		writeMetricsUnauthorized(w)
	})
}

// errWrongMetricsToken is the answer authFailed gives back for a wrong
// metrics token that did not block its address.
var errWrongMetricsToken = errorf(http.StatusUnauthorized, codeUnauthorized, "GET /metrics needs the metrics token")

// metricsTokenOf reports whether r has a bearer token, and whether its
// SHA-256 hash is want (compared in constant time).
func metricsTokenOf(r *http.Request, want [32]byte) (given, ok bool) {
	scheme, got, isBearer := strings.Cut(r.Header.Get("Authorization"), " ")
	got = strings.TrimSpace(got)
	sum := sha256.Sum256([]byte(got))
	given = isBearer && strings.EqualFold(scheme, "Bearer") && got != ""
	return given, given && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
}

// writeMetricsUnauthorized answers 401 to a request for metrics without
// their token.
func writeMetricsUnauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="taskd metrics"`)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte(`{"error":{"code":"unauthorized","message":"GET /metrics needs the metrics token"}}` + "\n"))
}
