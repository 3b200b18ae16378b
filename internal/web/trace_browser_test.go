package web_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd"
)

// traceURL is the telemetry.trace_url of the trace link tests.
const traceURL = "http://jaeger.example:16686/trace/{trace_id}?uiEmbed=v0"

// tracedEvent is an event of a task's history as the API answers it.
type tracedEvent struct {
	Kind    string `json:"kind"`
	Fence   int64  `json:"fence"`
	TraceID string `json:"trace_id"`
}

// tracedClaims starts a server with a tracer provider and telemetry.trace_url
// set to traceURL (or not); has one editor claim a task and release it, and a
// second claim and submit it; and returns the server, the task and its
// history as the API answers it (claimed, released, claimed, submitted),
// each event's trace id checked to be a recorded span's and its own.
func tracedClaims(t *testing.T, withURL bool) (*server, int64, []tracedEvent) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	var cfg taskd.Config
	if withURL {
		cfg.Telemetry.TraceURL = traceURL
	}
	s := startServer(t, cfg, taskd.WithTracerProvider(tp))
	_, ada := s.editor("Ada Editor", "news")
	_, ben := s.editor("Ben Editor", "news")
	id := s.addTask("news", 1, "Council votes on the budget", map[string]any{"text": "x"})
	s.post(ada, "/v1/assignments/next", `{}`, http.StatusOK)
	s.post(ada, fmt.Sprintf("/v1/assignments/%d/release", id), `{"fence":1}`, http.StatusNoContent)
	s.post(ben, "/v1/assignments/next", `{}`, http.StatusOK)
	s.post(ben, fmt.Sprintf("/v1/assignments/%d/submit", id), `{"fence":2,"result":{"ok":true}}`, http.StatusOK)

	var d struct {
		History []tracedEvent `json:"history"`
	}
	s.admin("GET", fmt.Sprintf("/v1/tasks/%d", id), nil, http.StatusOK, &d)
	var kinds []string
	for _, ev := range d.History {
		kinds = append(kinds, fmt.Sprintf("%s %d", ev.Kind, ev.Fence))
	}
	if got, want := strings.Join(kinds, ", "), "claimed 1, released 1, claimed 2, submitted 2"; got != want {
		t.Fatalf("history %s, want %s", got, want)
	}
	recorded := map[string]bool{}
	for _, sp := range rec.Ended() {
		recorded[sp.SpanContext().TraceID().String()] = true
	}
	seen := map[string]bool{}
	for _, ev := range d.History {
		if !recorded[ev.TraceID] || seen[ev.TraceID] {
			t.Fatalf("event %s %d: trace id %q is no recorded span's or not its own (history %+v)", ev.Kind, ev.Fence, ev.TraceID, d.History)
		}
		seen[ev.TraceID] = true
	}
	return s, id, d.History
}

// post calls the API with an editor's token, failing the test unless the
// answer has status want.
func (s *server) post(token, path, body string, want int) {
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
	if res.StatusCode != want {
		s.t.Fatalf("POST %s: status %d, want %d: %s", path, res.StatusCode, want, b)
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

// TestBrowserOpsTraceLink: the task detail's audit trail links each event's
// trace through telemetry.trace_url, in a new tab without referrer: both
// claims of the task, each to its own trace, and the release and the submit
// to theirs. The editor list links a live claim's trace.
func TestBrowserOpsTraceLink(t *testing.T) {
	s, id, hist := tracedClaims(t, true)
	tb := newTab(t, 1280, 800)
	tb.opsSignIn(s)
	tb.do("the task", chromedp.Navigate(s.base+fmt.Sprintf("/ops#tasks/%d", id)))
	tb.waitJS("the trace links", `document.querySelectorAll("#td-history tbody tr td.trace a").length === 4`)
	// Each row, newest first: its event, fence, link's address, text, rel and target.
	got := eval[string](tb, `Array.from(document.querySelectorAll("#td-history tbody tr")).map(function (tr) {
		var a = tr.querySelector("td.trace a");
		return [tr.cells[1].textContent, tr.cells[2].textContent, a.href, a.textContent, a.rel, a.target].join(" ");
	}).join("\n")`)
	var want []string
	for i := len(hist) - 1; i >= 0; i-- {
		ev := hist[i]
		want = append(want, strings.Join([]string{ev.Kind, strconv.FormatInt(ev.Fence, 10),
			strings.ReplaceAll(traceURL, "{trace_id}", ev.TraceID), ev.TraceID, "noopener noreferrer", "_blank"}, " "))
	}
	if got != strings.Join(want, "\n") {
		t.Errorf("audit trail's trace links:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if hist[0].TraceID == hist[2].TraceID {
		t.Errorf("both claims link trace %s, want each its own", hist[0].TraceID)
	}
	tb.screenshot("ops-trace-link")

	bobID, bob := s.editor("Bob Editor", "news")
	s.addTask("news", 1, "Storm warning for the coast", map[string]any{"text": "y"})
	s.post(bob, "/v1/assignments/next", `{}`, http.StatusOK)
	var ed struct {
		Claim struct {
			TraceID string `json:"trace_id"`
		} `json:"claim"`
		RecentClaims []struct {
			TaskID  int64  `json:"task_id"`
			TraceID string `json:"trace_id"`
		} `json:"recent_claims"`
	}
	s.admin("GET", fmt.Sprintf("/v1/editors/%d", bobID), nil, http.StatusOK, &ed)
	if len(ed.Claim.TraceID) != 32 {
		t.Fatalf("bob's claim's trace id %q, want one of its own", ed.Claim.TraceID)
	}
	tb.do("the editors", chromedp.Navigate(s.base+"/ops#editors"))
	edLink := `document.querySelector('#editors-table tr[data-editor="` + itoa(bobID) + `"] a.trace')`
	tb.waitJS("bob's trace link", edLink+` !== null`)
	if got, want := eval[string](tb, edLink+`.href`), strings.ReplaceAll(traceURL, "{trace_id}", ed.Claim.TraceID); got != want {
		t.Errorf("bob's trace link %q, want %q", got, want)
	}
	for _, ev := range hist {
		if ev.TraceID == ed.Claim.TraceID {
			t.Errorf("bob's claim links trace %s, the task's %s event's", ed.Claim.TraceID, ev.Kind)
		}
	}
	if n := eval[int](tb, `document.querySelectorAll("#editors-table a.trace").length`); n != 1 {
		t.Errorf("%d trace links in the editor list, want bob's only", n)
	}
	tb.screenshot("ops-editors-trace-link")

	// The editor's detail lists its recent claims, each linked to its trace.
	if len(ed.RecentClaims) != 1 || ed.RecentClaims[0].TraceID != ed.Claim.TraceID {
		t.Fatalf("bob's recent claims %+v, want the one live claim with its trace %s", ed.RecentClaims, ed.Claim.TraceID)
	}
	tb.do("bob's detail", chromedp.Navigate(s.base+"/ops#editors/"+itoa(bobID)))
	recent := `document.querySelector('#ed-meta ul.recent-claims li[data-task="` + strconv.FormatInt(ed.RecentClaims[0].TaskID, 10) + `"] a.trace')`
	tb.waitJS("bob's recent claim's trace link", recent+` !== null`)
	if got, want := eval[string](tb, recent+`.href`), strings.ReplaceAll(traceURL, "{trace_id}", ed.Claim.TraceID); got != want {
		t.Errorf("bob's recent claim links %q, want %q", got, want)
	}
	tb.screenshot("ops-editor-recent-claims")
}

// TestBrowserOpsTraceText: without telemetry.trace_url, each event's trace
// id is text, no link.
func TestBrowserOpsTraceText(t *testing.T) {
	s, id, hist := tracedClaims(t, false)
	tb := newTab(t, 1280, 800)
	tb.opsSignIn(s)
	tb.do("the task", chromedp.Navigate(s.base+fmt.Sprintf("/ops#tasks/%d", id)))
	tb.waitJS("the trace ids", `document.querySelectorAll("#td-history tbody tr td.trace code").length === 4`)
	got := eval[string](tb, `Array.from(document.querySelectorAll("#td-history td.trace code")).map(c => c.textContent).join(",") +
		"|" + document.querySelectorAll("#td-history td.trace a").length`)
	want := hist[3].TraceID + "," + hist[2].TraceID + "," + hist[1].TraceID + "," + hist[0].TraceID + "|0"
	if got != want {
		t.Errorf("trace cells %q, want %q", got, want)
	}
}
