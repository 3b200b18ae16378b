package api_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/testenv"
)

// await returns the value c delivers, failing the test after 10s.
func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10s", what)
		panic("unreachable")
	}
}

func TestShutdownDrains(t *testing.T) {
	t.Parallel()
	// GET /metrics stands for a slow request: it runs until released.
	entered, release := make(chan struct{}), make(chan struct{})
	b := setup(t, setupOpts{api: api.Config{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, "metrics\n")
	})}})
	e := b.editor(t, "ada", "news")

	polled := make(chan response, 1)
	go func() {
		res, err := b.doCtx(context.Background(), "POST", "/v1/assignments/next", e.Token, `{"wait_ms": 60000}`)
		if err != nil {
			t.Errorf("long poll: %v", err)
		}
		polled <- res
	}()
	testenv.Eventually(t, 10*time.Second, "long poll waiting", func() bool { return b.d.Stats().Waiting > 0 })
	scraped := make(chan response, 1)
	go func() {
		res, err := b.doCtx(context.Background(), "GET", "/metrics", "", "")
		if err != nil {
			t.Errorf("GET /metrics: %v", err)
		}
		scraped <- res
	}()
	await(t, entered, "slow request started")

	shut := make(chan error, 1)
	go func() { shut <- b.api.Shutdown(context.Background()) }()
	// The long poll ends at once with "nothing now", not after its wait.
	wantStatus(t, await(t, polled, "long poll answer"), http.StatusNoContent)
	// New requests are refused while the slow one runs.
	wantError(t, b.do(t, "GET", "/healthz", "", ""), http.StatusServiceUnavailable, "unavailable")
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned (%v) while a request was in flight", err)
	default:
	}
	close(release)
	wantStatus(t, await(t, scraped, "slow request answer"), http.StatusOK)
	if err := await(t, shut, "Shutdown"); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

func TestShutdownContextEnds(t *testing.T) {
	t.Parallel()
	entered, release := make(chan struct{}), make(chan struct{})
	b := setup(t, setupOpts{api: api.Config{Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		close(entered)
		<-release
	})}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = b.doCtx(context.Background(), "GET", "/metrics", "", "")
	}()
	await(t, entered, "slow request started")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.api.Shutdown(ctx); err == nil {
		t.Error("Shutdown with an ended context and a request in flight returned nil")
	}
	close(release)
	await(t, done, "slow request answer")
	if err := b.api.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}
