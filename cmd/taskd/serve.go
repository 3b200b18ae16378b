package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/taskd/taskd/cmd/taskd/internal/config"
	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/dispatcher/telemetry"
	"github.com/taskd/taskd/tasks"
)

// sweeperStopTimeout bounds the wait for a running sweep at shutdown.
const sweeperStopTimeout = 10 * time.Second

// longPollPath is the API's long-polling route, which serve ends early at
// shutdown (see drainLongPolls).
const longPollPath = "/v1/assignments/next"

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
	b, err := a.openServing(ctx, f)
	if err != nil {
		return err
	}
	defer b.Close(ctx)
	return serve(ctx, b, nil)
}

// openServing loads the configuration of a command that serves the API
// (serve, dev), checks what serving needs, and opens the stores.
func (a *app) openServing(ctx context.Context, f *cmdFlags) (*backend, error) {
	cfg, err := a.loadConfig(f)
	if err != nil {
		return nil, err
	}
	if err := needAdminToken(cfg); err != nil {
		return nil, err
	}
	log := newLogger(cfg.Log, a.stderr)
	if err := checkWorkerCategories(cfg, log); err != nil {
		return nil, err
	}
	return openBackend(ctx, cfg, a.stdout, log)
}

// needAdminToken fails when admin_token is unset: the API needs it.
func needAdminToken(cfg *config.Config) error {
	if cfg.AdminToken == "" {
		return &usageError{err: errors.New("config: admin_token: must be set to serve the API (at least 16 characters; TASKD_ADMIN_TOKEN)")}
	}
	return nil
}

// checkWorkerCategories fails, naming worker.categories, when in-process
// workers are configured for a category without a handler.
func checkWorkerCategories(cfg *config.Config, log *slog.Logger) error {
	if !cfg.Worker.InServe {
		return nil
	}
	handlers := newHandlers(log).Categories()
	for _, c := range cfg.Worker.Categories {
		if !slices.Contains(handlers, c) {
			return &usageError{err: fmt.Errorf("config: worker.categories: no handler for %q (handlers: %v)", c, handlers)}
		}
	}
	return nil
}

// serve runs the API server, the sweeper and the optional workers on b until
// ctx ends, then shuts them down in order. listening, when set, is called with
// the address once the server accepts connections.
func serve(ctx context.Context, b *backend, listening func(addr string)) error {
	cfg, log := b.cfg, b.log
	handler, err := newAPIHandler(b)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.HTTP.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.HTTP.Addr, err)
	}

	// The background loops run until the shutdown below stops them, not when
	// the signal arrives.
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	if err := b.d.Start(runCtx); err != nil {
		_ = ln.Close()
		return err
	}
	defer func() { _ = b.d.Stop(context.Background()) }()

	sweeper, err := dispatcher.NewSweeper(b.d, dispatcher.SweeperConfig{
		Interval: cfg.Sweep.Interval,
		Batch:    cfg.Sweep.Batch,
		Workers:  cfg.Sweep.Workers,
		Redis:    b.redis.sweepClient(),
		Logger:   log,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	if err := sweeper.Start(runCtx); err != nil {
		_ = ln.Close()
		return err
	}
	stopObserving, err := telemetry.ObservePool(b.tel, func(ctx context.Context) (*tasks.Stats, error) {
		return b.store.Stats(ctx, 0)
	}, 0)
	if err != nil {
		_ = ln.Close()
		stopSweeper(sweeper, log)
		return err
	}
	defer stopObserving()

	var worker *dispatcher.Worker
	if cfg.Worker.InServe {
		if worker, err = startWorker(runCtx, b); err != nil {
			_ = ln.Close()
			stopSweeper(sweeper, log)
			return err
		}
	}

	drainCtx, startDrain := context.WithCancel(context.Background())
	defer startDrain()
	srv := &http.Server{
		Handler:           drainLongPolls(handler, drainCtx, log),
		ReadHeaderTimeout: cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       cfg.HTTP.ReadTimeout,
		WriteTimeout:      cfg.HTTP.WriteTimeout,
		IdleTimeout:       cfg.HTTP.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	log.InfoContext(ctx, "serving", "addr", addr, "sweep_interval", cfg.Sweep.Interval,
		"lease_ttl", cfg.Dispatch.LeaseTTL, "workers", cfg.Worker.InServe)
	if listening != nil {
		listening(addr)
	}

	var failed error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "cause", context.Cause(ctx), "shutdown_timeout", cfg.HTTP.ShutdownTimeout)
	case err := <-serveErr:
		failed = fmt.Errorf("serve: %w", err)
		log.Error("server failed; shutting down", "err", err)
	}

	// Stop accepting, end the long polls, and let in-flight requests finish;
	// the workers drain at the same time.
	var shutdown sync.WaitGroup
	if worker != nil {
		shutdown.Go(func() {
			if err := stopWorker(worker, b); err != nil {
				log.Error("stop workers", "err", err)
			}
		})
	}
	startDrain()
	sctx, cancel := context.WithTimeout(context.Background(), cfg.HTTP.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("requests still running at the shutdown timeout were cut off", "err", err)
		_ = srv.Close()
	}
	shutdown.Wait()
	stopSweeper(sweeper, log)
	log.Info("stopped")
	return failed
}

func stopSweeper(s *dispatcher.Sweeper, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), sweeperStopTimeout)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		log.Warn("stop sweeper", "err", err)
	}
}

// errShuttingDown is the cause of a long poll's context ended by a shutdown.
var errShuttingDown = errors.New("server shutting down")

// drainLongPolls wraps h so that long polls (POST /v1/assignments/next) end as
// soon as drain ends, answered 204 No Content ("nothing now, ask again"), instead
// of holding the server's graceful shutdown for up to http.max_wait. Other
// requests are not touched: they finish normally.
//
// A long poll cancelled while it was committing a claim may commit it without
// answering; that is safe, because asking again returns the claim an editor
// already holds.
func drainLongPolls(h http.Handler, drain context.Context, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != longPollPath {
			h.ServeHTTP(w, r)
			return
		}
		log.DebugContext(r.Context(), "assignment requested", "remote_addr", r.RemoteAddr)
		ctx, cancel := context.WithCancelCause(r.Context())
		defer cancel(nil)
		stop := context.AfterFunc(drain, func() { cancel(errShuttingDown) })
		defer stop()
		tw := &writeTracker{ResponseWriter: w}
		h.ServeHTTP(tw, r.WithContext(ctx))
		if !tw.wrote && errors.Is(context.Cause(ctx), errShuttingDown) && r.Context().Err() == nil {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

// writeTracker records whether a handler wrote a response.
type writeTracker struct {
	http.ResponseWriter
	wrote bool
}

func (t *writeTracker) WriteHeader(status int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(status)
}

func (t *writeTracker) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (t *writeTracker) Unwrap() http.ResponseWriter { return t.ResponseWriter }
