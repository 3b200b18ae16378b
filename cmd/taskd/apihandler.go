package main

import (
	"net/http"
)

// newAPIHandler returns the HTTP handler of `taskd serve`.
//
// Temporary: package dispatcher/api, which implements the API, is not in the
// tree yet; until it is, the server answers GET /healthz only.
func newAPIHandler(b *backend) (http.Handler, error) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
	})
	if b.tel.metrics != nil {
		mux.Handle("GET /metrics", b.tel.metrics)
	}
	return mux, nil
}
