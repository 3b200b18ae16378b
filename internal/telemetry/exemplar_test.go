package telemetry_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/tasks"
)

// exemplar is one exemplar of an OpenMetrics exposition, and the sample it
// is on.
type exemplar struct {
	metric string            // the sample's name: name_bucket
	labels map[string]string // the sample's labels, le included
	ex     map[string]string // the exemplar's labels: trace_id, span_id
}

var (
	// exemplarLine is a sample with an exemplar: name{labels} value # {labels} value [timestamp].
	exemplarLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} \S+ # \{(.*)\} \S+( \S+)?$`)
	labelPair    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// parseLabels reads name="value" pairs.
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range labelPair.FindAllStringSubmatch(s, -1) {
		m[kv[1]] = kv[2]
	}
	return m
}

// scrapeOpenMetrics GETs h asking for OpenMetrics, as Prometheus does, and
// returns the exemplars of the exposition. It fails the test when the answer
// is not OpenMetrics or does not end with # EOF.
func scrapeOpenMetrics(t *testing.T, h http.Handler) []exemplar {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Fatalf("GET /metrics with an OpenMetrics Accept: content type %q, want application/openmetrics-text", ct)
	}
	body := rec.Body.String()
	if !strings.HasSuffix(body, "# EOF\n") {
		t.Fatalf("OpenMetrics exposition does not end with # EOF:\n%s", body)
	}
	var out []exemplar
	for _, line := range strings.Split(body, "\n") {
		if m := exemplarLine.FindStringSubmatch(line); m != nil {
			out = append(out, exemplar{metric: m[1], labels: parseLabels(m[2]), ex: parseLabels(m[3])})
		}
	}
	return out
}

// exemplarsOf returns the exemplars on the buckets of histogram whose labels
// include labels.
func exemplarsOf(all []exemplar, histogram string, labels map[string]string) []exemplar {
	var out []exemplar
next:
	for _, e := range all {
		if e.metric != histogram+"_bucket" {
			continue
		}
		for k, v := range labels {
			if e.labels[k] != v {
				continue next
			}
		}
		out = append(out, e)
	}
	return out
}

// spanNamed returns the one ended span called name.
func spanNamed(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	var found sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			if found != nil {
				t.Fatalf("two %s spans among %v", name, spanNamesOf(spans))
			}
			found = s
		}
	}
	if found == nil {
		t.Fatalf("no %s span among %v", name, spanNamesOf(spans))
	}
	return found
}

// wantExemplar requires exactly one exemplar on histogram's series of labels,
// pointing at span and carrying nothing else.
func wantExemplar(t *testing.T, all []exemplar, histogram string, labels map[string]string, span sdktrace.ReadOnlySpan) {
	t.Helper()
	got := exemplarsOf(all, histogram, labels)
	if len(got) != 1 {
		t.Errorf("%s%v: %d exemplars %v, want 1, on the bucket of the %s measurement", histogram, labels, len(got), got, span.Name())
		return
	}
	e := got[0]
	if tid, sid := span.SpanContext().TraceID().String(), span.SpanContext().SpanID().String(); e.ex["trace_id"] != tid || e.ex["span_id"] != sid {
		t.Errorf("%s%v le=%s: exemplar %v, want trace_id=%s span_id=%s (%s)", histogram, labels, e.labels["le"], e.ex, tid, sid, span.Name())
	}
	if len(e.ex) != 2 {
		t.Errorf("%s%v le=%s: exemplar labels %v, want trace_id and span_id only", histogram, labels, e.labels["le"], e.ex)
	}
}

// TestExemplars: measurements of the latency histograms made under a
// sampled span carry its trace and span ids as an exemplar, which the
// metrics handler shows to a scraper that asks for OpenMetrics: the HTTP
// request's, the claim's and the submit's (hold time) on the claim path, a
// worker run's (hold time, from a batch of outcomes), and a recycling
// sweep's, with no label but trace_id and span_id. An unsampled
// measurement (an idle sweep) leaves none, and a scraper that asks for
// nothing gets the text format without them.
func TestExemplars(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(t.Context(), telemetry.Config{Prometheus: true})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() { shutdown(t, p) })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)) // samples every trace
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	p.TracerProvider = tp
	pl := newPipeline(t, p)
	c := pl.editor(t, "news")
	ids := pl.add(t, "news", 1)
	sw, err := sweeper.New(pl.d, sweeper.Config{Store: pl.store, Locks: pl.locks})
	if err != nil {
		t.Fatal(err)
	}

	// An idle sweep is measured without a span: no exemplar.
	if _, err := sw.Sweep(t.Context()); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if got := exemplarsOf(scrapeOpenMetrics(t, p.Metrics), "taskd_sweep_duration_seconds", nil); len(got) != 0 {
		t.Errorf("an idle, untraced sweep left exemplars %v", got)
	}

	// A sweep that recycles an expired claim is traced, and measured under
	// its span.
	pl.next(t, c, ids[0])
	if _, err := pl.store.DB().ExecContext(t.Context(),
		"UPDATE tasks SET lease_expires_at = NOW(3) - INTERVAL 1 SECOND WHERE id = ?", ids[0]); err != nil {
		t.Fatal(err)
	}
	if res, err := sw.Sweep(t.Context()); err != nil || res.Recycled != 1 {
		t.Fatalf("sweep = %+v, %v; want 1 recycled", res, err)
	}
	sweep := spanNamed(t, rec.Ended(), "dispatcher.sweep")

	// A claim through the API, then its submit. A bucket's exemplar is one
	// sampled measurement picked at random among those since the last
	// collection, which starts the pick anew: after this scrape, the API
	// claim's is the first, and kept.
	scrapeOpenMetrics(t, p.Metrics)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/assignments/next", func(w http.ResponseWriter, r *http.Request) {
		claim, err := pl.d.Next(r.Context(), c, 0)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(claim)
	})
	srv := httptest.NewServer(telemetry.HTTPHandler(mux, p))
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/assignments/next", nil)
	if err != nil {
		t.Fatal(err)
	}
	// A long Host, which otelhttp reads as server.address: dropped from
	// the metrics and from their exemplars, it must not cost the exemplar.
	req.Host = strings.Repeat("a-long-virtual-host-name.", 6) + "example:8080"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("next: %d %s", resp.StatusCode, b)
	}
	var claim struct {
		Task  struct{ ID int64 }
		Fence int64
	}
	if err := json.Unmarshal(b, &claim); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if claim.Task.ID != ids[0] {
		t.Fatalf("claimed task %d, want the recycled %d", claim.Task.ID, ids[0])
	}
	if _, err := pl.d.Submit(t.Context(), c, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}, json.RawMessage(`"done"`)); err != nil {
		t.Fatalf("submit: %v", err)
	}
	spans := rec.Ended()
	server := spanNamed(t, spans, "POST /v1/assignments/next")
	var claimSpan sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "dispatcher.claim" && s.SpanContext().TraceID() == server.SpanContext().TraceID() {
			claimSpan = s
		}
	}
	if claimSpan == nil {
		t.Fatalf("no dispatcher.claim span in the request's trace %s", server.SpanContext().TraceID())
	}
	submit := spanNamed(t, spans, "dispatcher.submit")

	// The first claim's exemplar may remain on another bucket.
	all := scrapeOpenMetrics(t, p.Metrics)
	wantExemplar(t, all, "http_server_request_duration_seconds", map[string]string{"http_route": "/v1/assignments/next"}, server)
	var found bool
	for _, e := range exemplarsOf(all, "taskd_claim_duration_seconds", map[string]string{"taskd_outcome": "claimed"}) {
		if e.ex["trace_id"] == server.SpanContext().TraceID().String() && e.ex["span_id"] == claimSpan.SpanContext().SpanID().String() {
			found = true
		}
	}
	if !found {
		t.Errorf("taskd_claim_duration_seconds{claimed}: no exemplar of trace_id=%s span_id=%s (the API claim's dispatcher.claim) among %v",
			server.SpanContext().TraceID(), claimSpan.SpanContext().SpanID(), exemplarsOf(all, "taskd_claim_duration_seconds", nil))
	}
	// The API claim's queue wait, measured under its claim span.
	found = false
	for _, e := range exemplarsOf(all, "taskd_queue_wait_seconds", map[string]string{"taskd_task_category": "news"}) {
		found = found || e.ex["trace_id"] == server.SpanContext().TraceID().String() && e.ex["span_id"] == claimSpan.SpanContext().SpanID().String()
	}
	if !found {
		t.Errorf("taskd_queue_wait_seconds{news}: no exemplar of trace_id=%s span_id=%s (the API claim's dispatcher.claim) among %v",
			server.SpanContext().TraceID(), claimSpan.SpanContext().SpanID(), exemplarsOf(all, "taskd_queue_wait_seconds", nil))
	}
	wantExemplar(t, all, "taskd_hold_duration_seconds", map[string]string{"taskd_operation": "submit"}, submit)
	wantExemplar(t, all, "taskd_sweep_duration_seconds", map[string]string{"taskd_outcome": "done"}, sweep)

	// A worker's outcome, written in a batch: the hold time (the run time
	// of a worker's task) is measured under the run's span, not the
	// batch's.
	ids = pl.add(t, "news", 1)
	claim2 := pl.next(t, c, ids[0])
	scrapeOpenMetrics(t, p.Metrics)
	_, run := tp.Tracer("test").Start(t.Context(), "worker.run")
	var completed error
	pl.d.CompleteMany(t.Context(), []dispatcher.Outcome{{Span: run, Outcome: tasks.Outcome{
		TaskID: claim2.Task.ID, Fence: claim2.Fence, Holder: c.Holder, Result: json.RawMessage(`"ran"`),
	}}}, func(_ int, _ *tasks.Ended, err error) bool { completed = err; return err == nil })
	run.End()
	if completed != nil {
		t.Fatalf("complete: %v", completed)
	}
	found = false
	for _, e := range exemplarsOf(scrapeOpenMetrics(t, p.Metrics), "taskd_hold_duration_seconds", map[string]string{"taskd_operation": "submit"}) {
		found = found || e.ex["span_id"] == run.SpanContext().SpanID().String() && e.ex["trace_id"] == run.SpanContext().TraceID().String()
	}
	if !found {
		t.Errorf("taskd_hold_duration_seconds{submit}: no exemplar of the worker.run span %s", run.SpanContext().SpanID())
	}

	// An old scraper, asking for the text format or for nothing, gets it,
	// without exemplars.
	for _, accept := range []string{"", "text/plain;version=0.0.4"} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		p.Metrics.ServeHTTP(rec, req)
		if ct := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || !strings.HasPrefix(ct, "text/plain") {
			t.Errorf("GET /metrics, Accept %q: %d, content type %q; want 200 and the text format", accept, rec.Code, ct)
			continue
		}
		body := rec.Body.String()
		if strings.Contains(body, "trace_id") {
			t.Errorf("GET /metrics, Accept %q: the text format has exemplars", accept)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		if _, err := parser.TextToMetricFamilies(strings.NewReader(body)); err != nil {
			t.Errorf("GET /metrics, Accept %q: parse: %v", accept, err)
		}
		if !strings.Contains(body, "\ntaskd_claim_duration_seconds_bucket{") {
			t.Errorf("GET /metrics, Accept %q: no taskd_claim_duration_seconds buckets", accept)
		}
	}
}

func (e exemplar) String() string { return fmt.Sprintf("%s%v # %v", e.metric, e.labels, e.ex) }
