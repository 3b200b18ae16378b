package taskd_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// lines returns the JSON log lines written so far.
func (b *lockedBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("decode log line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestLogTraceIDs: a line the engine logs inside a traced request carries
// the request's trace id and the id of a span of that trace; a line logged
// outside any request carries none.
func TestLogTraceIDs(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	logs := &lockedBuffer{}
	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		AdminToken: testAdminToken,
	}, taskd.WithTracerProvider(tp), taskd.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))))
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status := post("http://"+e.Addr()+"/v1/editors", testAdminToken, `{"name":"ann","categories":["c"]}`, nil); status != http.StatusCreated {
		t.Fatalf("POST /v1/editors: %d, want 201", status)
	}
	var traceID string
	inTrace := map[string]bool{}
	testenv.Eventually(t, 10*time.Second, "the span of POST /v1/editors", func() bool {
		for _, s := range spans.Ended() {
			if s.Name() == "POST /v1/editors" {
				traceID = s.SpanContext().TraceID().String()
			}
		}
		return traceID != ""
	})
	for _, s := range spans.Ended() {
		if s.SpanContext().TraceID().String() == traceID {
			inTrace[s.SpanContext().SpanID().String()] = true
		}
	}
	var found, serving bool
	for _, m := range logs.lines(t) {
		if m["msg"] == "editor created" {
			found = true
			if m["trace_id"] != traceID {
				t.Errorf("editor created: trace_id = %v, want the request's %s", m["trace_id"], traceID)
			}
			if id, _ := m["span_id"].(string); !inTrace[id] {
				t.Errorf("editor created: span_id = %v, not a span of the request's trace", m["span_id"])
			}
		}
		if m["msg"] == "serving" {
			serving = true
			if _, ok := m["trace_id"]; ok {
				t.Errorf("serving: trace_id outside a request: %v", m)
			}
		}
	}
	if !found || !serving {
		t.Errorf("log lines \"editor created\", \"serving\" found: %t, %t, want both", found, serving)
	}
}

// TestWorkerLogTraceIDs: a line the worker logs about a task's run carries
// the trace and span ids of that run's worker.run span.
func TestWorkerLogTraceIDs(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	logs := &lockedBuffer{}
	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		AdminToken: testAdminToken,
	}, taskd.WithTracerProvider(tp), taskd.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))),
		taskd.WithHandler("failing", taskd.HandlerFunc(func(context.Context, *tasks.Task) (any, error) {
			return nil, fmt.Errorf("broken: %w", taskd.SkipRetry)
		})))
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status := post("http://"+e.Addr()+"/v1/tasks", testAdminToken, `[{"category":"failing","title":"t"}]`, nil); status != http.StatusOK && status != http.StatusCreated {
		t.Fatalf("POST /v1/tasks: %d", status)
	}
	var line map[string]any
	testenv.Eventually(t, 30*time.Second, "the worker's log line about the failed task", func() bool {
		for _, m := range logs.lines(t) {
			if msg, _ := m["msg"].(string); strings.HasPrefix(msg, "task failed") {
				line = m
				return true
			}
		}
		return false
	})
	var run sdktrace.ReadOnlySpan
	testenv.Eventually(t, 10*time.Second, "the worker.run span", func() bool {
		for _, s := range spans.Ended() {
			if s.Name() == "worker.run" {
				run = s
				return true
			}
		}
		return false
	})
	if line["trace_id"] != run.SpanContext().TraceID().String() || line["span_id"] != run.SpanContext().SpanID().String() {
		t.Errorf("%v: trace_id, span_id = %v, %v, want worker.run's %s, %s", line["msg"], line["trace_id"], line["span_id"],
			run.SpanContext().TraceID(), run.SpanContext().SpanID())
	}
}
