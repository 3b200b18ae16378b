package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/taskd/taskd/cmd/taskd/internal/wordcount"
	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// workerFinishMargin is added to worker.shutdown_timeout for the wait on
// shutdown: cancelled handlers still give their claims back after the drain.
const workerFinishMargin = 15 * time.Second

// newHandlers returns the handlers this binary ships, by category.
func newHandlers(log *slog.Logger) *tasks.ServeMux {
	mux := tasks.NewServeMux()
	mux.Handle(wordcount.Category, wordcount.Handler(log))
	return mux
}

// runWork runs a worker process until SIGINT or SIGTERM.
func runWork(ctx context.Context, a *app, args []string) error {
	categories := strings.Join(newHandlers(slog.Default()).Categories(), ", ")
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
	cfg, err := a.loadConfig(f)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, a.stderr)
	b, err := openBackend(ctx, cfg, a.stdout, log)
	if err != nil {
		return err
	}
	defer b.Close(ctx)

	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	if err := b.d.Start(runCtx); err != nil {
		return err
	}
	defer func() { _ = b.d.Stop(context.Background()) }()

	stopMetrics, err := serveWorkerMetrics(b)
	if err != nil {
		return err
	}
	defer stopMetrics()
	w, err := startWorker(runCtx, b)
	if err != nil {
		return err
	}
	<-ctx.Done()
	log.Info("stopping: worker draining", "shutdown_timeout", cfg.Worker.ShutdownTimeout)
	return stopWorker(w, b)
}

// serveWorkerMetrics serves GET /healthz and, with Prometheus on, GET /metrics
// on worker.metrics_addr, if set, until stop is called.
func serveWorkerMetrics(b *backend) (stop func(), err error) {
	addr := b.cfg.Worker.MetricsAddr
	if addr == "" {
		return func() {}, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"ok"}`+"\n")
	})
	if b.tel.Metrics != nil {
		mux.Handle("GET /metrics", b.tel.Metrics)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on worker.metrics_addr %s: %w", addr, err)
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: b.cfg.HTTP.ReadHeaderTimeout,
		ReadTimeout:       b.cfg.HTTP.ReadTimeout,
		WriteTimeout:      b.cfg.HTTP.ReadTimeout,
		IdleTimeout:       b.cfg.HTTP.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(b.log.Handler(), slog.LevelWarn),
	}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			b.log.Error("metrics server", "err", err)
		}
	}()
	b.log.Info("serving worker metrics", "addr", ln.Addr().String(), "prometheus", b.tel.Metrics != nil)
	return func() { _ = srv.Close() }, nil
}

// startWorker builds and starts the worker of b's configuration. A category
// without a handler is a configuration error naming worker.categories.
func startWorker(ctx context.Context, b *backend) (*dispatcher.Worker, error) {
	cfg := b.cfg.Worker
	w, err := dispatcher.NewWorker(b.d, dispatcher.WorkerConfig{
		Concurrency:     cfg.Concurrency,
		Handler:         newHandlers(b.log),
		Categories:      cfg.Categories,
		ShutdownTimeout: cfg.ShutdownTimeout,
		Logger:          b.log,
	})
	if errors.Is(err, tasks.ErrNoHandler) {
		return nil, &usageError{err: fmt.Errorf("config: worker.categories: %w (handlers: %s)",
			err, strings.Join(newHandlers(b.log).Categories(), ", "))}
	}
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// stopWorker shuts w down: it stops claiming, lets handlers finish for
// worker.shutdown_timeout, then cancels them and releases their claims.
func stopWorker(w *dispatcher.Worker, b *backend) error {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Worker.ShutdownTimeout+workerFinishMargin)
	defer cancel()
	if err := w.Stop(ctx); err != nil {
		return fmt.Errorf("worker shutdown: %w", err)
	}
	st := w.Stats()
	b.log.Info("worker stopped", "processed", st.Processed, "failed", st.Failed,
		"lease_lost", st.LeaseLost, "released", st.Released)
	return nil
}
