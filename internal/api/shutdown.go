package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
)

// errShuttingDown is the cause of a long poll's context ended by
// Handler.Shutdown.
var errShuttingDown = errors.New("server shutting down")

// Handler is the API's http.Handler. It tracks the requests it serves, so
// that Shutdown can drain them wherever the handler is mounted.
type Handler struct {
	a *api

	mu       sync.Mutex
	draining bool
	inflight sync.WaitGroup
}

// ServeHTTP serves r; after Shutdown has started it answers 503 with
// Retry-After. Every answer carries X-Content-Type-Options: nosniff and
// Cache-Control: no-store (a route may set its own Cache-Control: the
// OpenAPI document is public), so that no browser guesses a JSON answer's
// type and no cache keeps an answer, a new editor's token least of all.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
	h.mu.Lock()
	if h.draining {
		h.mu.Unlock()
		w.Header().Set("Connection", "close")
		h.a.writeError(w, r, errorf(http.StatusServiceUnavailable, codeUnavailable, "the server is shutting down; retry later"))
		return
	}
	h.inflight.Add(1)
	h.mu.Unlock()
	defer h.inflight.Done()
	h.a.ServeHTTP(w, r)
}

// Shutdown drains the handler, like http.Server.Shutdown does a server: it
// ends long polls (POST /v1/assignments/next) at once, answered 204 No
// Content, answers new requests 503, and waits for the requests in flight
// to finish. It returns nil when none is left, or an error wrapping ctx's
// cause when ctx ends first. It may be called more than once.
func (h *Handler) Shutdown(ctx context.Context) error {
	h.mu.Lock()
	if !h.draining {
		h.draining = true
		h.a.endDrain()
	}
	h.mu.Unlock()
	done := make(chan struct{})
	go func() {
		h.inflight.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("api shutdown: requests still running: %w", context.Cause(ctx))
	}
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
