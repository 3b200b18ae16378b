package web_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd"
)

// traceURL is the telemetry.trace_url of the trace link tests.
const traceURL = "http://jaeger.example:16686/trace/{trace_id}?uiEmbed=v0"

// tracedClaim starts a server with a tracer provider and telemetry.trace_url
// set to traceURL (or not), has an editor claim and submit a task, and
// returns the server, the task and the claim's trace id as the API answers
// it, checked to be a recorded span's.
func tracedClaim(t *testing.T, withURL bool) (*server, int64, string) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	var cfg taskd.Config
	if withURL {
		cfg.Telemetry.TraceURL = traceURL
	}
	s := startServer(t, cfg, taskd.WithTracerProvider(tp))
	_, token := s.editor("Ada Editor", "news")
	id := s.addTask("news", 1, "Council votes on the budget", map[string]any{"text": "x"})
	s.post(token, "/v1/assignments/next", `{}`)
	s.post(token, fmt.Sprintf("/v1/assignments/%d/submit", id), `{"fence":1,"result":{"ok":true}}`)

	var d struct {
		History []struct {
			Kind    string `json:"kind"`
			TraceID string `json:"trace_id"`
		} `json:"history"`
	}
	s.admin("GET", fmt.Sprintf("/v1/tasks/%d", id), nil, http.StatusOK, &d)
	var traceID string
	for _, ev := range d.History {
		if ev.Kind == "claimed" {
			traceID = ev.TraceID
		}
	}
	found := false
	for _, sp := range rec.Ended() {
		found = found || (traceID != "" && sp.SpanContext().TraceID().String() == traceID)
	}
	if !found {
		t.Fatalf("the claim's trace id %q is no recorded span's (history %+v)", traceID, d.History)
	}
	return s, id, traceID
}

// post calls the API with an editor's token, failing the test unless the
// answer is 200.
func (s *server) post(token, path, body string) {
	s.t.Helper()
	req, err := http.NewRequestWithContext(s.t.Context(), "POST", s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		s.t.Fatalf("POST %s: status %d: %s", path, res.StatusCode, b)
	}
}

// TestOpsPageTraceURL: the console's page carries telemetry.trace_url for
// its script, escaped; without it, an empty one.
func TestOpsPageTraceURL(t *testing.T) {
	t.Parallel()
	for _, withURL := range []bool{true, false} {
		var cfg taskd.Config
		want := `<meta name="trace-url" content="">`
		if withURL {
			cfg.Telemetry.TraceURL = traceURL
			want = `<meta name="trace-url" content="http://jaeger.example:16686/trace/{trace_id}?uiEmbed=v0">`
		}
		s := startServer(t, cfg)
		c := browserClient(t)
		if res := s.opsSignIn(c, adminToken); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign in: status %d", res.StatusCode)
		}
		req, err := http.NewRequestWithContext(t.Context(), "GET", s.base+"/ops", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
			t.Errorf("trace URL set %v: GET /ops status %d, want 200 with %s in:\n%s", withURL, res.StatusCode, want, b)
		}
	}
}

// TestBrowserOpsTraceLink: the task detail's audit trail links the claim's
// trace through telemetry.trace_url, in a new tab without referrer; the
// other events have no trace. The editor list links a live claim's trace.
func TestBrowserOpsTraceLink(t *testing.T) {
	s, id, traceID := tracedClaim(t, true)
	tb := newTab(t, 1280, 800)
	tb.opsSignIn(s)
	tb.do("the task", chromedp.Navigate(s.base+fmt.Sprintf("/ops#tasks/%d", id)))
	link := `document.querySelector("#td-history tbody tr td.trace a")`
	tb.waitJS("the trace link", link+` !== null`)
	got := eval[string](tb, `[`+link+`.href, `+link+`.textContent, `+link+`.rel, `+link+`.target,
		document.querySelectorAll("#td-history td.trace a").length,
		document.querySelectorAll("#td-history tbody tr").length].join("|")`)
	want := strings.Join([]string{strings.ReplaceAll(traceURL, "{trace_id}", traceID), traceID, "noopener noreferrer", "_blank", "1", "2"}, "|")
	if got != want {
		t.Errorf("trace link %q, want %q", got, want)
	}
	tb.screenshot("ops-trace-link")

	bobID, bob := s.editor("Bob Editor", "news")
	s.addTask("news", 1, "Storm warning for the coast", map[string]any{"text": "y"})
	s.post(bob, "/v1/assignments/next", `{}`)
	var ed struct {
		Claim struct {
			TraceID string `json:"trace_id"`
		} `json:"claim"`
	}
	s.admin("GET", fmt.Sprintf("/v1/editors/%d", bobID), nil, http.StatusOK, &ed)
	if len(ed.Claim.TraceID) != 32 || ed.Claim.TraceID == traceID {
		t.Fatalf("bob's claim's trace id %q, want one of its own", ed.Claim.TraceID)
	}
	tb.do("the editors", chromedp.Navigate(s.base+"/ops#editors"))
	edLink := `document.querySelector('#editors-table tr[data-editor="` + itoa(bobID) + `"] a.trace')`
	tb.waitJS("bob's trace link", edLink+` !== null`)
	if got, want := eval[string](tb, edLink+`.href`), strings.ReplaceAll(traceURL, "{trace_id}", ed.Claim.TraceID); got != want {
		t.Errorf("bob's trace link %q, want %q", got, want)
	}
	if n := eval[int](tb, `document.querySelectorAll("#editors-table a.trace").length`); n != 1 {
		t.Errorf("%d trace links in the editor list, want bob's only", n)
	}
	tb.screenshot("ops-editors-trace-link")
}

// TestBrowserOpsTraceText: without telemetry.trace_url, the claim's trace id
// is text, no link.
func TestBrowserOpsTraceText(t *testing.T) {
	s, id, traceID := tracedClaim(t, false)
	tb := newTab(t, 1280, 800)
	tb.opsSignIn(s)
	tb.do("the task", chromedp.Navigate(s.base+fmt.Sprintf("/ops#tasks/%d", id)))
	tb.waitJS("the trace id", `document.querySelector("#td-history tbody tr td.trace code") !== null`)
	got := eval[string](tb, `[document.querySelector("#td-history td.trace code").textContent,
		document.querySelectorAll("#td-history td.trace a").length].join("|")`)
	if want := traceID + "|0"; got != want {
		t.Errorf("trace cell %q, want %q", got, want)
	}
}
