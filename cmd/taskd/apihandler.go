package main

import (
	"net/http"

	"github.com/taskd/taskd/dispatcher/api"
)

// newAPIHandler returns the HTTP handler of `taskd serve`: the API, with
// readiness checks of both stores and the metrics handler, if any.
func newAPIHandler(b *backend) (http.Handler, error) {
	return api.New(api.Config{
		Dispatcher: b.d,
		Store:      b.store,
		AdminToken: b.cfg.AdminToken,
		Checks: []api.Check{
			{Name: "mysql", Check: b.db.PingContext},
			{Name: "redis", Check: b.redis.check},
		},
		Metrics: b.tel.metrics,
		MaxWait: b.cfg.HTTP.MaxWait,
		Logger:  b.log,
	})
}
