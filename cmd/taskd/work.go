package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// runWork runs a worker process until SIGINT or SIGTERM.
func runWork(ctx context.Context, a *app, args []string) error {
	categories := strings.Join(handlerCategories, ", ")
	f := a.newFlags("work", "work [flags]", fmt.Sprintf(`
Runs a worker process: worker.concurrency slots each claim a task of
worker.categories (default: every category with a handler), run its handler while
renewing the lease every third of dispatch.lease_ttl, then submit it, or record
the failure to be retried with backoff until its attempts run out.

On SIGINT or SIGTERM it stops claiming, lets running handlers finish for up to
worker.shutdown_timeout, then cancels them and gives their tasks back to the
pool, and exits 0.

Handlers in this binary: %s. A "wordcount" task's payload is {"text": "..."};
its handler counts the words and logs the count.`, categories))
	if err := a.parse(f, args); err != nil {
		return err
	}
	if err := noArgs(f); err != nil {
		return err
	}
	e, err := a.newEngine(ctx, f, roleWorker)
	if err != nil {
		return err
	}
	if err := e.Start(ctx); err != nil {
		return errors.Join(err, e.Stop(context.Background()))
	}
	if addr := e.Addr(); addr != "" {
		e.log.Info("serving worker metrics", "addr", addr, "prometheus", e.cfg.Telemetry.Prometheus)
	}
	<-ctx.Done()
	e.log.Info("stopping: worker draining", "shutdown_timeout", e.cfg.Worker.ShutdownTimeout)
	return e.Stop(context.Background())
}
