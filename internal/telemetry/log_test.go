package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/taskd/taskd/internal/telemetry"
)

func TestLogHandler(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	defer span.End()
	sc := span.SpanContext()

	var buf bytes.Buffer
	base := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil)))
	if h := telemetry.LogHandler(base.Handler()); h != base.Handler() {
		t.Errorf("LogHandler of a wrapped handler wraps it again")
	}
	read := func(t *testing.T) map[string]any {
		t.Helper()
		var m map[string]any
		if err := json.Unmarshal(buf.Bytes(), &m); err != nil {
			t.Fatalf("decode %q: %v", buf.String(), err)
		}
		buf.Reset()
		return m
	}
	for _, tc := range []struct {
		name  string
		log   *slog.Logger
		check func(t *testing.T, m map[string]any)
	}{
		{"plain", base, nil},
		{"attrs", base.With("component", "api"), func(t *testing.T, m map[string]any) {
			if m["component"] != "api" {
				t.Errorf("component = %v, want api", m["component"])
			}
		}},
		{"group", base.With("a", 1).WithGroup("g").With("b", 2), func(t *testing.T, m map[string]any) {
			g, _ := m["g"].(map[string]any)
			if m["a"] != 1.0 || g["b"] != 2.0 || g["k"] != "v" {
				t.Errorf("record = %v, want a=1 and g.b=2, g.k=v", m)
			}
			if _, ok := g["trace_id"]; ok {
				t.Errorf("trace_id under the group: %v", m)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.log.InfoContext(ctx, "in span", "k", "v")
			m := read(t)
			if m["trace_id"] != sc.TraceID().String() || m["span_id"] != sc.SpanID().String() {
				t.Errorf("trace_id, span_id = %v, %v, want %s, %s", m["trace_id"], m["span_id"], sc.TraceID(), sc.SpanID())
			}
			if tc.check != nil {
				tc.check(t, m)
			}

			tc.log.InfoContext(context.Background(), "no span", "k", "v")
			m = read(t)
			if _, ok := m["trace_id"]; ok {
				t.Errorf("trace_id without a span: %v", m)
			}
			if _, ok := m["span_id"]; ok {
				t.Errorf("span_id without a span: %v", m)
			}
			if tc.check != nil {
				tc.check(t, m)
			}
		})
	}
}
