package taskd_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/testenv"
)

// TestKeepFailedTraces: at sample ratio 0 with telemetry.keep_failed, a lost
// claim's 409 is exported with the whole tree of its request (the server
// span and the dispatcher's under it), and the successful claim and
// submit before it are not.
func TestKeepFailedTraces(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := telemetry.NewTracerProvider(exp, telemetry.Config{SampleRatio: 0, KeepFailed: true})
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		AdminToken: testAdminToken,
	}, taskd.WithTracerProvider(tp))
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	base := "http://" + e.Addr()
	var editor struct{ Token string }
	if status := post(base+"/v1/editors", testAdminToken, `{"name":"ann","categories":["c"]}`, &editor); status != http.StatusCreated {
		t.Fatalf("POST /v1/editors: %d, want 201", status)
	}
	if status := post(base+"/v1/tasks", testAdminToken, `[{"category":"c","title":"t"}]`, nil); status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("POST /v1/tasks: %d", status)
	}
	var next struct {
		Task  struct{ ID int64 }
		Fence int64
	}
	if status := post(base+"/v1/assignments/next", editor.Token, `{}`, &next); status != http.StatusOK {
		t.Fatalf("POST /v1/assignments/next: %d, want 200", status)
	}
	submit := fmt.Sprintf("%s/v1/assignments/%d/submit", base, next.Task.ID)
	body := fmt.Sprintf(`{"fence":%d,"result":{"ok":true}}`, next.Fence)
	if status := post(submit, editor.Token, body, nil); status != http.StatusOK {
		t.Fatalf("submit: %d, want 200", status)
	}
	if status := post(submit, editor.Token, body, nil); status != http.StatusConflict {
		t.Fatalf("second submit: %d, want 409", status)
	}

	const lost = "POST /v1/assignments/{task}/submit"
	var server sdktrace.ReadOnlySpan
	testenv.Eventually(t, 10*time.Second, "the lost claim's server span exported", func() bool {
		_ = tp.ForceFlush(t.Context())
		for _, s := range exp.GetSpans().Snapshots() {
			if s.Name() == lost {
				server = s
				return true
			}
		}
		return false
	})
	if err := tp.ForceFlush(t.Context()); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range exp.GetSpans().Snapshots() {
		if s.SpanContext().TraceID() != server.SpanContext().TraceID() {
			t.Errorf("span %s exported outside the lost claim's trace", s.Name())
			continue
		}
		names[s.Name()] = true
	}
	// The engine's store and Redis handles here are the test's, not
	// instrumented: the tree is the request's and the dispatcher's spans.
	for _, want := range []string{lost, "dispatcher.submit"} {
		if !names[want] {
			t.Errorf("the lost claim's trace lacks %s; has %v", want, names)
		}
	}
	for _, s := range exp.GetSpans().Snapshots() {
		if s.Name() != lost && s.Parent().SpanID() != server.SpanContext().SpanID() && !parentExported(exp, s) {
			t.Errorf("span %s exported without its parent", s.Name())
		}
	}
}

// parentExported reports whether exp has the parent of s.
func parentExported(exp *tracetest.InMemoryExporter, s sdktrace.ReadOnlySpan) bool {
	for _, p := range exp.GetSpans().Snapshots() {
		if p.SpanContext().SpanID() == s.Parent().SpanID() {
			return true
		}
	}
	return false
}
