package main

import "context"

// runServe runs the API server until SIGINT or SIGTERM.
func runServe(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("serve", "serve [flags]", `
Runs the HTTP API on http.addr, the sweeper that returns expired claims to the
pool every sweep.interval, and, with worker.in_serve, workers running the
registered handlers (as 'taskd work' does).

Both MySQL and Redis must be reachable at start. On SIGINT or SIGTERM the server
stops accepting connections, answers waiting long polls with 204, lets in-flight
requests finish for up to http.shutdown_timeout, stops the sweeper and the
workers, closes the stores and exits 0.`)
	if err := a.parse(f, args); err != nil {
		return err
	}
	if err := noArgs(f); err != nil {
		return err
	}
	e, err := a.newEngine(ctx, f, roleServe)
	if err != nil {
		return err
	}
	return e.Run(ctx)
}
