package api_test

import (
	"fmt"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd/dispatcher"
)

// TestEventTraceID checks that a task's history gives its latest claim the
// trace id of the traceparent stored with it, in GET /v1/tasks/{id} and in
// GET /v1/tasks/{id}/events, and no other event one; and that the editors'
// live claims carry theirs.
func TestEventTraceID(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	b := setup(t, setupOpts{dispatcher: dispatcher.Config{TracerProvider: tp}})
	ada, bob := b.editor(t, "ada", "news"), b.editor(t, "bob", "news")
	id := b.addN(t, "news", 1)[0]

	first := b.next(t, ada.Token)
	wantStatus(t, b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/release", id), ada.Token, fmt.Sprintf(`{"fence":%d}`, first.Fence)), http.StatusNoContent)
	second := b.next(t, bob.Token)
	if second.Task.ID != id {
		t.Fatalf("bob claimed task %d, want %d", second.Task.ID, id)
	}
	stored := b.task(t, id).TraceContext
	if len(stored) != 55 {
		t.Fatalf("stored traceparent %q, want one", stored)
	}
	want := stored[3:35]
	recorded := false
	for _, s := range rec.Ended() {
		recorded = recorded || s.SpanContext().TraceID().String() == want
	}
	if !recorded {
		t.Fatalf("trace id %s of the stored traceparent is no recorded span's", want)
	}

	check := func(what string, evs []event) {
		t.Helper()
		withID := 0
		for _, ev := range evs {
			switch {
			case ev.Kind == "claimed" && ev.Fence == second.Fence:
				if ev.TraceID == nil || *ev.TraceID != want {
					t.Errorf("%s: latest claim's event %+v, want trace id %s", what, ev, want)
				}
				withID++
			case ev.TraceID != nil:
				t.Errorf("%s: event %d (%s, fence %d) has trace id %s, want none", what, ev.ID, ev.Kind, ev.Fence, *ev.TraceID)
			}
		}
		if withID != 1 {
			t.Errorf("%s: %d events of the latest claim, want 1", what, withID)
		}
	}
	var d taskDetail
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, ""), http.StatusOK, &d)
	check("GET /v1/tasks/{id}", d.History)
	var page eventPage
	last := d.History[len(d.History)-1].ID
	wantJSON(t, b.do(t, "GET", fmt.Sprintf("/v1/tasks/%d/events?before=%d", id, last+1), adminToken, ""), http.StatusOK, &page)
	check("GET /v1/tasks/{id}/events", page.Events)

	// The editors: bob's live claim carries its trace id, ada holds nothing.
	for _, ed := range b.listEditors(t, "").Editors {
		switch {
		case ed.ID == bob.ID && (ed.Claim == nil || ed.Claim.TraceID == nil || *ed.Claim.TraceID != want):
			t.Errorf("GET /v1/editors: bob's claim %+v, want trace id %s", ed.Claim, want)
		case ed.ID == ada.ID && ed.Claim != nil:
			t.Errorf("GET /v1/editors: ada holds %+v, want nothing", ed.Claim)
		}
	}
	if c := b.getEditor(t, bob.ID).Claim; c == nil || c.TraceID == nil || *c.TraceID != want {
		t.Errorf("GET /v1/editors/{id}: bob's claim %+v, want trace id %s", c, want)
	}
}
