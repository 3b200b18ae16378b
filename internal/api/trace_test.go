package api_test

import (
	"fmt"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd/dispatcher"
)

// TestEventTraceID checks that a task's history gives each event the trace id
// of the request that wrote it, in GET /v1/tasks/{id} and in GET
// /v1/tasks/{id}/events: two claims and a release of one task each their own,
// the latest claim's the one of the traceparent stored with the task, and an
// event written without a trace none; and that the editors' live claims carry
// theirs.
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
	recorded := map[string]bool{}
	for _, s := range rec.Ended() {
		recorded[s.SpanContext().TraceID().String()] = true
	}
	if !recorded[want] {
		t.Fatalf("trace id %s of the stored traceparent is no recorded span's", want)
	}
	// An event written without a trace, as those before the store kept
	// trace ids were.
	if _, err := b.db.Exec(`INSERT INTO task_events (task_id, kind, fence, holder, detail) VALUES (?, 'released', ?, 'op', 'untraced')`,
		id, second.Fence); err != nil {
		t.Fatal(err)
	}

	check := func(what string, evs []event) {
		t.Helper()
		byKind := map[string]string{}
		for _, ev := range evs {
			key := fmt.Sprintf("%s %d", ev.Kind, ev.Fence)
			if ev.Detail != nil && *ev.Detail == "untraced" {
				key = "untraced"
			}
			if _, dup := byKind[key]; dup {
				t.Fatalf("%s: two events %s", what, key)
			}
			byKind[key] = ""
			if ev.TraceID != nil {
				byKind[key] = *ev.TraceID
			}
		}
		claim1, release1 := byKind[fmt.Sprintf("claimed %d", first.Fence)], byKind[fmt.Sprintf("released %d", first.Fence)]
		claim2, untraced := byKind[fmt.Sprintf("claimed %d", second.Fence)], byKind["untraced"]
		switch {
		case claim2 != want:
			t.Errorf("%s: latest claim's trace id %q, want %s", what, claim2, want)
		case !recorded[claim1] || claim1 == want:
			t.Errorf("%s: first claim's trace id %q, want a recorded trace of its own", what, claim1)
		case !recorded[release1] || release1 == claim1 || release1 == want:
			t.Errorf("%s: release's trace id %q, want a recorded trace of its own", what, release1)
		case untraced != "":
			t.Errorf("%s: untraced event's trace id %q, want none", what, untraced)
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
	bd := b.getEditor(t, bob.ID)
	if c := bd.Claim; c == nil || c.TraceID == nil || *c.TraceID != want {
		t.Errorf("GET /v1/editors/{id}: bob's claim %+v, want trace id %s", c, want)
	}
	if rc := bd.RecentClaims; len(rc) == 0 || rc[0].TraceID == nil || *rc[0].TraceID != want {
		t.Errorf("GET /v1/editors/{id}: bob's recent claims %+v, want the newest with trace id %s", rc, want)
	}
}
