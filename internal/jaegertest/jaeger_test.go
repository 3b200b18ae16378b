package jaegertest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

const (
	// jaegerVar names the Jaeger binary (scripts/jaeger.sh prints it).
	jaegerVar = "TASKD_JAEGER"
	// requireJaegerVar makes a missing Jaeger a failure, not a skip.
	requireJaegerVar = "TASKD_TEST_REQUIRE_JAEGER"

	adminToken  = "jaeger-test-admin-token-0123456789"
	serviceName = "taskd"
	// leaseTTL is short so that the lost claim expires soon, long enough
	// that the claims the test submits at once never do on a loaded machine.
	leaseTTL = 3 * time.Second
	// within bounds every wait: Jaeger ingests asynchronously, and taskd
	// exports in batches.
	within = 60 * time.Second
)

// TestTracesInJaeger runs taskd against a real Jaeger and finds, through
// Jaeger's query API, by task id: an editor's claim and its submit (linked
// to the claim), a lost claim's submit answered 409, and a worker's run of
// a task, each with its span tree and attributes. Sweeps with nothing to do
// add no traces; the one sweep that recycles the lost claim adds one.
func TestTracesInJaeger(t *testing.T) {
	t.Parallel()
	start := time.Now()
	bin := jaegerBinary(t)
	j := startJaeger(t, bin)
	s := startTaskd(t, j.otlpHTTP)

	// An editor's claim, and its submit.
	editor := s.newEditor(t, "news-editor", "news")
	claimed := s.addTasks(t, "news", map[string]any{})
	var a assignment
	s.expect(t, http.StatusOK, "POST", "/v1/assignments/next", editor.Token, map[string]any{"wait_ms": 0}, &a)
	if a.Task.ID != claimed {
		t.Fatalf("claimed task %d, want %d", a.Task.ID, claimed)
	}
	s.expect(t, http.StatusOK, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), editor.Token,
		map[string]any{"fence": a.Fence, "result": map[string]any{"ok": true}}, nil)

	// A task the in-process worker runs.
	worked := s.addTasks(t, "wordcount", map[string]any{"text": "three short words"})
	eventually(t, "the worker's task done", func() bool {
		return s.taskStatus(t, worked) == "done"
	})

	claim := checkClaim(t, j, a, editor.ID)
	checkSubmit(t, j, a, editor.ID, claim)
	checkWorkerRun(t, j, worked)

	// A quiet period: sweeps with nothing to sweep make no traces. Every
	// trace above is in Jaeger, so sweeps before them would be too.
	sweeps := s.sweeps(t)
	eventually(t, "three more sweeps", func() bool { return s.sweeps(t) >= sweeps+3 })
	s.traced(t, j, "after the quiet period")
	if got := j.traces(t, url.Values{"operation": {"dispatcher.sweep"}}); len(got) != 0 {
		t.Fatalf("%d dispatcher.sweep traces after %d sweeps with nothing to sweep, want none:\n%s",
			len(got), s.sweeps(t), describe(got))
	}
	t.Logf("%d sweeps, no sweep trace", s.sweeps(t))
	// The worker's polls found nothing all along: none made a trace.
	if got := j.traces(t, url.Values{"operation": {"dispatcher.claim_many"}, "tags": {`{"taskd.outcome":"none"}`}}); len(got) != 0 {
		t.Fatalf("%d traces of worker polls that claimed nothing, want none:\n%s", len(got), describe(got))
	}

	// A lost claim: it expires, a sweep recycles it, and its late submit
	// is refused. That sweep is the only one traced.
	late := s.newEditor(t, "late-editor", "late")
	lost := s.addTasks(t, "late", map[string]any{})
	var b assignment
	s.expect(t, http.StatusOK, "POST", "/v1/assignments/next", late.Token, map[string]any{"wait_ms": 0}, &b)
	if b.Task.ID != lost {
		t.Fatalf("claimed task %d, want %d", b.Task.ID, lost)
	}
	eventually(t, "the lost claim recycled", func() bool { return s.taskStatus(t, lost) == "pending" })
	status, body := s.call(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", lost), late.Token,
		map[string]any{"fence": b.Fence, "result": "late"})
	if status != http.StatusConflict {
		t.Fatalf("late submit of task %d: %d %s, want 409", lost, status, body)
	}
	checkLostSubmit(t, j, b, late.ID)
	checkSweep(t, j, s)
	t.Logf("taskd's traces in Jaeger, by root span: %v", j.roots(t))
	t.Logf("claim, submit, lost claim, worker run and sweep found in Jaeger in %v", time.Since(start).Round(100*time.Millisecond))
}

// checkClaim finds the claim's trace by task id: POST /v1/assignments/next
// → dispatcher.next → dispatcher.claim, with Redis and MySQL spans under the
// claim. It returns the trace.
func checkClaim(t *testing.T, j *jaeger, a assignment, editorID int64) trace {
	t.Helper()
	tr := j.find(t, "the claim's trace", taskQuery(a.Task.ID, "dispatcher.next"))
	root := tr.root(t)
	wantName(t, tr, root, "POST /v1/assignments/next")
	wantTags(t, tr, root, map[string]string{"http.route": "/v1/assignments/next", "http.response.status_code": "200"})
	next := tr.only(t, "dispatcher.next")
	wantParent(t, tr, next, root)
	wantTags(t, tr, next, map[string]string{
		"taskd.task.id": itoa(a.Task.ID), "taskd.fence": itoa(a.Fence), "taskd.editor.id": itoa(editorID),
		"taskd.task.category": "news",
	})
	c := tr.only(t, "dispatcher.claim")
	wantParent(t, tr, c, next)
	wantTags(t, tr, c, map[string]string{
		"taskd.task.id": itoa(a.Task.ID), "taskd.fence": itoa(a.Fence), "taskd.editor.id": itoa(editorID),
		"taskd.outcome": "claimed",
	})
	wantStoreChildren(t, tr, c)
	return tr
}

// checkSubmit finds the submit's trace by task id: POST
// /v1/assignments/{task}/submit → dispatcher.submit, linked to the claim's
// trace, with a MySQL span under the submit.
func checkSubmit(t *testing.T, j *jaeger, a assignment, editorID int64, claim trace) {
	t.Helper()
	tr := j.find(t, "the submit's trace", taskQuery(a.Task.ID, "dispatcher.submit"))
	if tr.TraceID == claim.TraceID {
		t.Fatalf("the submit is in the claim's trace %s, want a trace of its own", tr.TraceID)
	}
	root := tr.root(t)
	wantName(t, tr, root, "POST /v1/assignments/{task}/submit")
	wantTags(t, tr, root, map[string]string{"http.response.status_code": "200"})
	sub := tr.only(t, "dispatcher.submit")
	wantParent(t, tr, sub, root)
	wantTags(t, tr, sub, map[string]string{
		"taskd.task.id": itoa(a.Task.ID), "taskd.fence": itoa(a.Fence), "taskd.editor.id": itoa(editorID),
		"taskd.outcome": "done",
	})
	wantDescendant(t, tr, sub, "a MySQL span", isMySQL)
	// The submit is linked to a span of the claim's trace.
	var linked []string
	for _, r := range sub.References {
		if r.RefType == "FOLLOWS_FROM" && r.TraceID == claim.TraceID {
			if s, ok := claim.span(r.SpanID); ok {
				linked = append(linked, s.OperationName)
			}
		}
	}
	if len(linked) == 0 {
		t.Errorf("dispatcher.submit has no link to a span of the claim's trace %s; references %+v", claim.TraceID, sub.References)
	} else {
		t.Logf("dispatcher.submit links the claim's %v", linked)
	}
}

// checkLostSubmit finds the late submit's trace by task id: answered 409,
// its dispatcher.submit refused.
func checkLostSubmit(t *testing.T, j *jaeger, b assignment, editorID int64) {
	t.Helper()
	tr := j.find(t, "the lost claim's submit", taskQuery(b.Task.ID, "dispatcher.submit"))
	root := tr.root(t)
	wantName(t, tr, root, "POST /v1/assignments/{task}/submit")
	wantTags(t, tr, root, map[string]string{"http.response.status_code": "409"})
	sub := tr.only(t, "dispatcher.submit")
	wantParent(t, tr, sub, root)
	wantTags(t, tr, sub, map[string]string{
		"taskd.task.id": itoa(b.Task.ID), "taskd.fence": itoa(b.Fence), "taskd.editor.id": itoa(editorID),
		"taskd.outcome": "refused",
	})
	wantDescendant(t, tr, sub, "a MySQL span", isMySQL)
}

// checkWorkerRun finds the worker's run of task id: a worker.run trace of
// its own with the claim's task, fence, holder and attempt, and the
// outcome.
func checkWorkerRun(t *testing.T, j *jaeger, id int64) {
	t.Helper()
	tr := j.find(t, "the worker's run", taskQuery(id, "worker.run"))
	root := tr.root(t)
	wantName(t, tr, root, "worker.run")
	wantTags(t, tr, root, map[string]string{
		"taskd.task.id": itoa(id), "taskd.task.category": "wordcount", "taskd.fence": "1", "taskd.attempt": "1",
		"taskd.outcome": "done",
	})
	if v, ok := root.tag("taskd.holder"); !ok || v == "" {
		t.Errorf("worker.run has no taskd.holder:\n%s", tr)
	}
	// The run is linked, once, to the span that claimed the task, in a
	// trace of the worker's claim.
	var links []reference
	for _, r := range root.References {
		if r.RefType == "FOLLOWS_FROM" {
			links = append(links, r)
		}
	}
	if len(links) != 1 {
		t.Fatalf("worker.run links %d spans, want 1 (its claim's): %+v", len(links), root.References)
	}
	claim := j.byID(t, "the worker's claim", links[0].TraceID)
	c, ok := claim.span(links[0].SpanID)
	if !ok {
		t.Fatalf("worker.run links span %s, not in trace %s:\n%s", links[0].SpanID, claim.TraceID, claim)
	}
	wantName(t, claim, c, "dispatcher.claim_many")
	wantTags(t, claim, c, map[string]string{"taskd.outcome": "claimed"})
	wantStoreChildren(t, claim, c)
}

// checkSweep finds the one sweep trace: dispatcher.sweep, with one claim
// recycled, over dispatcher.sweep.recycle.
func checkSweep(t *testing.T, j *jaeger, s *taskd) {
	t.Helper()
	tr := j.find(t, "the sweep that recycled the lost claim", url.Values{"operation": {"dispatcher.sweep"}})
	root := tr.root(t)
	wantName(t, tr, root, "dispatcher.sweep")
	wantTags(t, tr, root, map[string]string{"taskd.sweep.recycled": "1", "taskd.sweep.skipped": "false"})
	// The recycling SQL ran before the sweep knew it had work, so before
	// its span: the step's Redis calls (the claim's lock, the wake-up) are
	// under dispatcher.sweep.recycle, the later steps' SQL under the sweep.
	rec := tr.only(t, "dispatcher.sweep.recycle")
	wantParent(t, tr, rec, root)
	wantTags(t, tr, rec, map[string]string{"taskd.sweep.recycled": "1"})
	wantDescendant(t, tr, rec, "a Redis span", isRedis)
	wantDescendant(t, tr, root, "a MySQL span", isMySQL)

	// Later sweeps have nothing to do again: two more, and still one
	// sweep trace.
	n := s.sweeps(t)
	eventually(t, "two more sweeps", func() bool { return s.sweeps(t) >= n+2 })
	s.traced(t, j, "after the recycling sweep")
	if got := j.traces(t, url.Values{"operation": {"dispatcher.sweep"}}); len(got) != 1 {
		t.Errorf("%d dispatcher.sweep traces, want the one that recycled the lost claim:\n%s", len(got), describe(got))
	}
}

// ---------------------------------------------------------------------------
// Expected spans

func wantName(t *testing.T, tr trace, s span, name string) {
	t.Helper()
	if s.OperationName != name {
		t.Errorf("span %s is %q, want %q:\n%s", s.SpanID, s.OperationName, name, tr)
	}
}

func wantParent(t *testing.T, tr trace, s, parent span) {
	t.Helper()
	if p := s.parentID(); p != parent.SpanID {
		t.Errorf("%s's parent is %s, want %s (%s):\n%s", s.OperationName, p, parent.SpanID, parent.OperationName, tr)
	}
}

func wantTags(t *testing.T, tr trace, s span, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.tag(k); !ok || got != v {
			t.Errorf("%s: %s=%q (set: %v), want %q:\n%s", s.OperationName, k, got, ok, v, tr)
		}
	}
}

// wantDescendant checks that a span under s matches.
func wantDescendant(t *testing.T, tr trace, s span, what string, match func(span) bool) {
	t.Helper()
	if !slices.ContainsFunc(tr.descendants(s), match) {
		t.Errorf("no %s under %s:\n%s", what, s.OperationName, tr)
	}
}

// wantStoreChildren checks that a Redis and a MySQL client span are under s.
func wantStoreChildren(t *testing.T, tr trace, s span) {
	t.Helper()
	wantDescendant(t, tr, s, "a Redis span", isRedis)
	wantDescendant(t, tr, s, "a MySQL span", isMySQL)
}

func isRedis(s span) bool {
	v, _ := s.tag("db.system")
	return v == "redis"
}

func isMySQL(s span) bool {
	v, ok := s.tag("db.system.name")
	if !ok {
		v, _ = s.tag("db.system")
	}
	return v == "mysql"
}

// eventually is testenv.Eventually within the test's bound, checking every
// 50ms: each check is a request to taskd, itself traced, or to Jaeger.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, within, what, func() bool {
		if cond() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
		return false
	})
}

func taskQuery(id int64, operation string) url.Values {
	tags, _ := json.Marshal(map[string]string{"taskd.task.id": itoa(id)})
	return url.Values{"operation": {operation}, "tags": {string(tags)}}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// ---------------------------------------------------------------------------
// Jaeger

// jaegerBinary returns the Jaeger binary TASKD_JAEGER names, or skips the
// test (fails it under TASKD_TEST_REQUIRE_JAEGER=1).
func jaegerBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv(jaegerVar)
	msg := ""
	if bin == "" {
		msg = jaegerVar + " is not set: run make test-jaeger, or set it to a Jaeger v2 binary (scripts/jaeger.sh builds one and prints its path)"
	} else if fi, err := os.Stat(bin); err != nil || fi.IsDir() {
		msg = fmt.Sprintf("%s=%s: not a file (%v)", jaegerVar, bin, err)
	}
	if msg == "" {
		return bin
	}
	if os.Getenv(requireJaegerVar) == "1" {
		t.Fatalf("%s, and %s=1", msg, requireJaegerVar)
	}
	t.Skip(msg)
	return ""
}

// jaegerConfig is a Jaeger v2 all-in-one with in-memory storage, as
// deploy/README.md shows it, on loopback ports of the test's: the OTLP
// receivers (gRPC, HTTP) and the query service (HTTP, gRPC). No batch
// processor, so spans are stored as they arrive; no internal metrics
// listener (its default port is fixed), and no traces of Jaeger's own (they
// would go to localhost:4317).
const jaegerConfig = `service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: warn
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 100000
  jaeger_query:
    storage:
      traces: memstore
    enable_tracing: false
    http:
      endpoint: %s
    grpc:
      endpoint: %s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %s
      http:
        endpoint: %s
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
`

type jaeger struct {
	query    string // http://host:port of the query API
	otlpHTTP string // http://host:port of the OTLP/HTTP receiver
}

// startJaeger runs Jaeger on free loopback ports until the test ends, and
// waits until its query API answers and its OTLP/HTTP receiver listens.
// Ports are chosen free, then bound by Jaeger: one another process takes
// in between makes Jaeger exit, and it is started again on others.
func startJaeger(t *testing.T, bin string) *jaeger {
	t.Helper()
	for attempt := 1; ; attempt++ {
		j, err := tryJaeger(t, bin)
		if err == nil {
			return j
		}
		if attempt == 3 {
			t.Fatalf("start Jaeger: %v", err)
		}
		t.Logf("start Jaeger, attempt %d: %v", attempt, err)
	}
}

func tryJaeger(t *testing.T, bin string) (*jaeger, error) {
	t.Helper()
	ports := freePorts(t, 4)
	queryHTTP, queryGRPC, otlpGRPC, otlpHTTP := ports[0], ports[1], ports[2], ports[3]
	dir := t.TempDir()
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, jaegerConfig, queryHTTP, queryGRPC, otlpGRPC, otlpHTTP), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", "file:"+config)
	cmd.Dir = dir
	out := &testenv.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	j := &jaeger{query: "http://" + queryHTTP, otlpHTTP: "http://" + otlpHTTP}
	deadline := time.Now().Add(within)
	for {
		select {
		case <-done:
			return nil, fmt.Errorf("jaeger exited:\n%s", out)
		default:
		}
		if j.ready(otlpHTTP) {
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("not ready within %v:\n%s", within, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("jaeger output:\n%s", out)
		}
	})
	return j, nil
}

// ready reports whether the query API answers and the OTLP/HTTP receiver
// (started after it) accepts connections.
func (j *jaeger) ready(otlpHTTP string) bool {
	resp, err := http.Get(j.query + "/api/services")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	c, err := net.DialTimeout("tcp", otlpHTTP, time.Second)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

// freePorts returns n loopback addresses free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var addrs []string
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return addrs
}

// trace is a trace as Jaeger's query API (/api/traces) answers it.
type trace struct {
	TraceID string `json:"traceID"`
	Spans   []span `json:"spans"`
}

type span struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	References    []reference `json:"references"`
	StartTime     int64       `json:"startTime"`
	Tags          []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
}

type reference struct {
	RefType string `json:"refType"`
	TraceID string `json:"traceID"`
	SpanID  string `json:"spanID"`
}

// tag returns the value of the tag key, as text.
func (s span) tag(key string) (string, bool) {
	for _, tg := range s.Tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value), true
		}
	}
	return "", false
}

// parentID is the span id of s's parent in its trace, or "".
func (s span) parentID() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" && r.TraceID == s.TraceID {
			return r.SpanID
		}
	}
	return ""
}

func (tr trace) span(id string) (span, bool) {
	for _, s := range tr.Spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return span{}, false
}

// root returns the trace's one span without a parent.
func (tr trace) root(t *testing.T) span {
	t.Helper()
	var roots []span
	for _, s := range tr.Spans {
		if s.parentID() == "" {
			roots = append(roots, s)
		}
	}
	if len(roots) != 1 {
		t.Fatalf("trace %s has %d roots, want 1:\n%s", tr.TraceID, len(roots), tr)
	}
	return roots[0]
}

// only returns the trace's one span named name.
func (tr trace) only(t *testing.T, name string) span {
	t.Helper()
	var found []span
	for _, s := range tr.Spans {
		if s.OperationName == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("trace %s has %d %s spans, want 1:\n%s", tr.TraceID, len(found), name, tr)
	}
	return found[0]
}

// descendants returns the spans under s.
func (tr trace) descendants(s span) []span {
	var out []span
	for _, c := range tr.Spans {
		if c.parentID() == s.SpanID {
			out = append(out, c)
			out = append(out, tr.descendants(c)...)
		}
	}
	return out
}

// String draws the trace as an indented tree of span names, with the
// taskd.* and db.system tags.
func (tr trace) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "trace %s (%d spans)\n", tr.TraceID, len(tr.Spans))
	byParent := map[string][]span{}
	for _, s := range tr.Spans {
		byParent[s.parentID()] = append(byParent[s.parentID()], s)
	}
	for _, ss := range byParent {
		slices.SortFunc(ss, func(a, b span) int { return int(a.StartTime - b.StartTime) })
	}
	var draw func(parent string, depth int)
	draw = func(parent string, depth int) {
		for _, s := range byParent[parent] {
			var tags []string
			for _, tg := range s.Tags {
				if strings.HasPrefix(tg.Key, "taskd.") || strings.HasPrefix(tg.Key, "db.system") || tg.Key == "http.response.status_code" {
					tags = append(tags, fmt.Sprintf("%s=%v", tg.Key, tg.Value))
				}
			}
			fmt.Fprintf(&b, "%s%s %v\n", strings.Repeat("  ", depth+1), s.OperationName, tags)
			draw(s.SpanID, depth+1)
		}
	}
	draw("", 0)
	return b.String()
}

func describe(trs []trace) string {
	var b strings.Builder
	for _, tr := range trs {
		b.WriteString(tr.String())
	}
	return b.String()
}

// traces asks Jaeger for taskd's traces matching q (operation, tags).
func (j *jaeger) traces(t *testing.T, q url.Values) []trace {
	t.Helper()
	q = withDefaults(q, url.Values{"service": {serviceName}, "limit": {"1000"}, "lookback": {"1h"}})
	resp, err := http.Get(j.query + "/api/traces?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest && bytes.Contains(b, []byte("service")) {
		return nil // no span of the service yet
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /api/traces?%s: %d %s", q.Encode(), resp.StatusCode, b)
	}
	var out struct {
		Data []trace `json:"data"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("GET /api/traces?%s: decode: %v", q.Encode(), err)
	}
	return out.Data
}

// roots counts taskd's traces in Jaeger by the name of their root span,
// and its taskd.outcome when it has one.
func (j *jaeger) roots(t *testing.T) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, tr := range j.traces(t, nil) {
		for _, s := range tr.Spans {
			if s.parentID() != "" {
				continue
			}
			name := s.OperationName
			if o, ok := s.tag("taskd.outcome"); ok {
				name += " (" + o + ")"
			}
			n[name]++
		}
	}
	return n
}

// byID waits until Jaeger has the trace id, and returns it.
func (j *jaeger) byID(t *testing.T, what, id string) trace {
	t.Helper()
	var tr trace
	eventually(t, what+" in Jaeger", func() bool {
		resp, err := http.Get(j.query + "/api/traces/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusNotFound {
			return false // not yet ingested
		}
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /api/traces/%s: %d %s", id, resp.StatusCode, b)
		}
		var out struct {
			Data []trace `json:"data"`
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Data) != 1 {
			t.Fatalf("GET /api/traces/%s: %d traces, %v: %s", id, len(out.Data), err, b)
		}
		tr = out.Data[0]
		return true
	})
	return tr
}

// find waits until Jaeger has exactly one trace matching q, and returns it.
func (j *jaeger) find(t *testing.T, what string, q url.Values) trace {
	t.Helper()
	var got []trace
	failed := t.Failed()
	defer func() {
		if !failed && t.Failed() {
			t.Logf("%s: Jaeger answered %d traces for %v:\n%s", what, len(got), q, describe(got))
		}
	}()
	eventually(t, what+" in Jaeger", func() bool {
		got = j.traces(t, q)
		return len(got) > 0
	})
	if len(got) != 1 {
		t.Fatalf("%s: %d traces for %v, want 1:\n%s", what, len(got), q, describe(got))
	}
	return got[0]
}

// withDefaults returns q with the keys of defaults it lacks.
func withDefaults(q, defaults url.Values) url.Values {
	out := url.Values{}
	for k, v := range defaults {
		out[k] = v
	}
	for k, v := range q {
		out[k] = v
	}
	return out
}

// ---------------------------------------------------------------------------
// taskd

type taskd struct {
	base   string // http://addr
	stderr *testenv.LockedBuffer
}

// startTaskd builds the binary and runs `taskd serve` against the test
// services (a database and a Redis key prefix of its own), exporting every
// trace over OTLP/HTTP to endpoint, with sweeps every second, a short lease
// and in-process workers for the wordcount category.
func startTaskd(t *testing.T, endpoint string) *taskd {
	t.Helper()
	dsn := storetest.NewDatabase(t)
	opt, err := redis.ParseURL(testenv.Lookup(t, testenv.RedisURLVar))
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.RedisURLVar, err)
	}
	srv := testenv.StartServe(t, "../../cmd/taskd",
		"TASKD_MYSQL_DSN="+dsn,
		"TASKD_REDIS_ADDRS="+opt.Addr,
		"TASKD_REDIS_KEY_PREFIX="+testenv.Prefix(t),
		"TASKD_ADMIN_TOKEN="+adminToken,
		"TASKD_SWEEP_INTERVAL=1s",
		"TASKD_LEASE_TTL="+leaseTTL.String(),
		"TASKD_WORKER_IN_SERVE=true",
		"TASKD_WORKER_CATEGORIES=wordcount",
		"TASKD_TELEMETRY_TRACES=otlp-http",
		"TASKD_TELEMETRY_ENDPOINT="+endpoint,
		"TASKD_TELEMETRY_SAMPLE_RATIO=1",
		"TASKD_TELEMETRY_SERVICE_NAME="+serviceName,
		// The OpenTelemetry SDK's batch span processor exports every 5s by
		// default; the test waits less with 100ms.
		"OTEL_BSP_SCHEDULE_DELAY=100",
	)
	return &taskd{base: "http://" + srv.Addr, stderr: srv.Stderr}
}

// call sends a JSON request and returns the status and body.
func (s *taskd) call(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return resp.StatusCode, out
}

// expect is call that fails the test unless the status is want; it decodes
// the body into out when out is not nil.
func (s *taskd) expect(t *testing.T, want int, method, path, token string, body, out any) {
	t.Helper()
	status, b := s.call(t, method, path, token, body)
	if status != want {
		t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

type editor struct {
	ID    int64  `json:"id"`
	Token string `json:"token"`
}

type assignment struct {
	Task struct {
		ID int64 `json:"id"`
	} `json:"task"`
	Fence int64 `json:"fence"`
}

func (s *taskd) newEditor(t *testing.T, name string, categories ...string) editor {
	t.Helper()
	var e editor
	s.expect(t, http.StatusCreated, "POST", "/v1/editors", adminToken, map[string]any{"name": name, "categories": categories}, &e)
	return e
}

// addTasks adds a task of category with payload and returns its id.
func (s *taskd) addTasks(t *testing.T, category string, payload map[string]any) int64 {
	t.Helper()
	var out struct {
		IDs []int64 `json:"ids"`
	}
	s.expect(t, http.StatusCreated, "POST", "/v1/tasks", adminToken,
		[]map[string]any{{"category": category, "title": category, "payload": payload}}, &out)
	if len(out.IDs) != 1 {
		t.Fatalf("POST /v1/tasks: ids %v, want one", out.IDs)
	}
	return out.IDs[0]
}

func (s *taskd) taskStatus(t *testing.T, id int64) string {
	t.Helper()
	var task struct {
		Status string `json:"status"`
	}
	s.expect(t, http.StatusOK, "GET", fmt.Sprintf("/v1/tasks/%d", id), adminToken, nil, &task)
	return task.Status
}

// sweeps returns how many sweeps taskd has run, from the count of its
// taskd_sweep_duration_seconds histogram (every sweep, whatever its
// outcome).
func (s *taskd) sweeps(t *testing.T) int {
	t.Helper()
	status, b := s.call(t, "GET", "/metrics", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	n := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "taskd_sweep_duration_seconds_count{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("GET /metrics: %q: %v", line, err)
		}
		n += int(v)
	}
	return n
}

// traced makes a traced request of its own (an admin's task, then its
// cancel) and waits until Jaeger has its trace: spans taskd ended before
// it, exported in order, are in Jaeger then too.
func (s *taskd) traced(t *testing.T, j *jaeger, what string) {
	t.Helper()
	id := s.addTasks(t, "marker", map[string]any{})
	s.expect(t, http.StatusNoContent, "POST", fmt.Sprintf("/v1/admin/tasks/%d/cancel", id), adminToken, nil, nil)
	j.find(t, "the marker trace "+what, taskQuery(id, "dispatcher.cancel"))
}
