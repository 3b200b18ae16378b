package main

import (
	"cmp"
	"net/http"

	"github.com/taskd/taskd/dispatcher/api"
	"github.com/taskd/taskd/dispatcher/telemetry"
)

// newAPIHandler returns the HTTP handler of `taskd serve`: the API, with
// readiness checks of both stores and the Prometheus exposition when enabled,
// in a server span per request when tracing is.
func newAPIHandler(b *backend) (http.Handler, error) {
	h, err := api.New(api.Config{
		Dispatcher: b.d,
		Store:      b.store,
		AdminToken: b.cfg.AdminToken,
		Checks: []api.Check{
			{Name: "mysql", Check: b.db.PingContext},
			{Name: "redis", Check: b.redis.check},
		},
		Metrics:        b.tel.Metrics,
		MaxWait:        b.cfg.HTTP.MaxWait,
		RequestTimeout: b.cfg.HTTP.RequestTimeout,
		// 0 in the config turns the cache off; in api.Config it means the
		// default.
		EditorCacheTTL: cmp.Or(b.cfg.HTTP.EditorCacheTTL, -1),
		Logger:         b.log,
	})
	if err != nil {
		return nil, err
	}
	return telemetry.HTTPHandler(h, b.tel), nil
}
