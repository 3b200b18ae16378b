package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

func TestMain(m *testing.M) {
	testenv.QuietRedis()
	os.Exit(m.Run())
}

// Markers put into a task's payload and a submitted result: no span may
// carry them, since SQL arguments are never recorded.
const (
	payloadMarker = "payload-marker-7f3a"
	resultMarker  = "result-marker-91c2"
)

// pipeline is a dispatcher over a real Redis and a real MariaDB, both
// instrumented with the providers.
type pipeline struct {
	store *store.Store
	locks *locker.Client
	d     *dispatcher.Dispatcher
}

func newPipeline(t *testing.T, p *telemetry.Providers) *pipeline {
	t.Helper()
	ctx := t.Context()
	rdb := testenv.Redis(t)
	if err := telemetry.InstrumentRedis(rdb, p); err != nil {
		t.Fatalf("instrument redis: %v", err)
	}
	db, err := telemetry.OpenMySQL(ctx, storetest.NewDatabase(t), p)
	if err != nil {
		t.Fatalf("open mysql: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	store, err := store.New(db, store.Config{})
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	locks := locker.New(rdb)
	d, err := dispatcher.New(store, locks, dispatcher.Config{
		KeyPrefix:      testenv.Prefix(t),
		TracerProvider: p.TracerProvider,
		MeterProvider:  p.MeterProvider,
	})
	if err != nil {
		t.Fatalf("new dispatcher: %v", err)
	}
	return &pipeline{store: store, locks: locks, d: d}
}

// editor creates an editor of categories.
func (pl *pipeline) editor(t *testing.T, categories ...string) dispatcher.Claimant {
	t.Helper()
	_, hash := tasks.NewToken()
	e, err := pl.store.CreateEditor(t.Context(), tasks.CreateEditorParams{
		Name: "ed-" + t.Name(), Categories: categories, TokenHash: hash,
	})
	if err != nil {
		t.Fatalf("create editor: %v", err)
	}
	return dispatcher.EditorClaimant(e)
}

// add inserts n tasks of category, each carrying payloadMarker.
func (pl *pipeline) add(t *testing.T, category string, n int) []int64 {
	t.Helper()
	ts := make([]tasks.NewTask, n)
	for i := range ts {
		ts[i] = tasks.NewTask{
			Category: category, Title: category + " " + strconv.Itoa(i),
			Payload: json.RawMessage(`{"body":"` + payloadMarker + `"}`),
		}
	}
	ids, err := dispatchtest.IDsOf(pl.d.AddTasks(t.Context(), ts))
	if err != nil {
		t.Fatalf("add tasks: %v", err)
	}
	return ids
}

// next claims a task for c and checks it is want.
func (pl *pipeline) next(t *testing.T, c dispatcher.Claimant, want int64) *tasks.Claim {
	t.Helper()
	claim, err := pl.d.Next(t.Context(), c, 0)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	if claim.Task.ID != want {
		t.Fatalf("next claimed task %d, want %d", claim.Task.ID, want)
	}
	return claim
}

func shutdown(t *testing.T, p *telemetry.Providers) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
}

func TestOTLP(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(*testing.T) (string, *spanSink)
		cfg   func(endpoint string) telemetry.Config
	}{
		{"grpc", startGRPCReceiver, func(ep string) telemetry.Config {
			return telemetry.Config{Traces: telemetry.TracesOTLPGRPC, Endpoint: ep, Insecure: true}
		}},
		{"http", startHTTPReceiver, func(ep string) telemetry.Config {
			// A URL without a path: the exporter posts to /v1/traces.
			return telemetry.Config{Traces: telemetry.TracesOTLPHTTP, Endpoint: ep}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			endpoint, sink := tc.start(t)
			cfg := tc.cfg(endpoint)
			cfg.ServiceName = "taskd-test-" + tc.name
			cfg.SampleRatio = 1
			p, err := telemetry.Setup(t.Context(), cfg)
			if err != nil {
				t.Fatalf("setup: %v", err)
			}
			pl := newPipeline(t, p)
			c := pl.editor(t, "news")
			ids := pl.add(t, "news", 1)
			claim := pl.next(t, c, ids[0])
			next, err := pl.d.Submit(t.Context(), c, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence},
				json.RawMessage(`{"verdict":"`+resultMarker+`"}`))
			if err != nil || next != nil {
				t.Fatalf("submit: next %v, err %v; want none", next, err)
			}
			shutdown(t, p)

			checkClaimTrace(t, sink.all(), cfg.ServiceName, c, claim)
		})
	}
}

// checkClaimTrace checks the spans of one claim and its submit.
func checkClaimTrace(t *testing.T, spans []receivedSpan, service string, c dispatcher.Claimant, claim *tasks.Claim) {
	t.Helper()
	if len(spans) == 0 {
		t.Fatal("the receiver got no spans")
	}
	for _, s := range spans {
		if got := findAttr(s.resource.GetAttributes(), "service.name").GetStringValue(); got != service {
			t.Fatalf("span %q: resource service.name %q, want %q", s.Name, got, service)
		}
		for _, kv := range s.Attributes {
			if v := kv.Value.String(); strings.Contains(v, payloadMarker) || strings.Contains(v, resultMarker) {
				t.Errorf("span %q attribute %s carries SQL arguments: %s", s.Name, kv.Key, v)
			}
		}
	}

	// The claim that committed, and the next span it belongs to.
	var claimSpan, nextSpan, submitSpan *receivedSpan
	for i, s := range spans {
		switch {
		case s.Name == "dispatcher.claim" && s.attr("taskd.outcome").GetStringValue() == "claimed":
			claimSpan = &spans[i]
		case s.Name == "dispatcher.submit":
			submitSpan = &spans[i]
		}
	}
	if claimSpan == nil || submitSpan == nil {
		t.Fatalf("want a claimed dispatcher.claim span and a dispatcher.submit span, got %v", spanNames(spans))
	}
	for i, s := range spans {
		if s.Name == "dispatcher.next" && s.spanID() == claimSpan.parentID() {
			nextSpan = &spans[i]
		}
	}
	if nextSpan == nil {
		t.Fatalf("the claim span's parent %s is no dispatcher.next span; spans: %v", claimSpan.parentID(), spanNames(spans))
	}
	if got := nextSpan.attr("taskd.task.id").GetIntValue(); got != claim.Task.ID {
		t.Errorf("dispatcher.next taskd.task.id = %d, want %d", got, claim.Task.ID)
	}

	wantInt := map[string]int64{
		"taskd.task.id": claim.Task.ID, "taskd.fence": claim.Fence, "taskd.editor.id": c.EditorID,
		"taskd.candidates.tried": 1, "taskd.lock.conflicts": 0,
	}
	for key, want := range wantInt {
		v := claimSpan.attr(key)
		if v == nil {
			t.Errorf("dispatcher.claim has no %s", key)
		} else if v.GetIntValue() != want {
			t.Errorf("dispatcher.claim %s = %d, want %d", key, v.GetIntValue(), want)
		}
	}
	if got := claimSpan.attr("taskd.task.category").GetStringValue(); got != "news" {
		t.Errorf("dispatcher.claim taskd.task.category = %q, want news", got)
	}

	// The submit span links to the claim span.
	linked := false
	for _, l := range submitSpan.Links {
		if bytes.Equal(l.TraceId, claimSpan.TraceId) && bytes.Equal(l.SpanId, claimSpan.SpanId) {
			linked = true
		}
	}
	if !linked {
		t.Errorf("dispatcher.submit links %v, want a link to the claim span %s/%s",
			submitSpan.Links, claimSpan.traceID(), claimSpan.spanID())
	}
	if got := submitSpan.attr("taskd.fence").GetIntValue(); got != claim.Fence {
		t.Errorf("dispatcher.submit taskd.fence = %d, want %d", got, claim.Fence)
	}

	// Redis and MySQL spans are children of the claim span.
	var redisSpans, sqlSpans int
	for _, s := range spans {
		if s.traceID() != claimSpan.traceID() || s.parentID() != claimSpan.spanID() {
			continue
		}
		switch s.scope {
		case "github.com/redis/go-redis/extra/redisotel":
			redisSpans++
			if got := s.attr("db.system").GetStringValue(); got != "redis" {
				t.Errorf("redis span %q: db.system %q, want redis", s.Name, got)
			}
		case "github.com/XSAM/otelsql":
			sqlSpans++
			if got := s.attr("db.system.name").GetStringValue(); got != "mysql" {
				t.Errorf("sql span %q: db.system.name %q, want mysql", s.Name, got)
			}
			if s.attr("server.address").GetStringValue() == "" || s.attr("db.namespace").GetStringValue() == "" {
				t.Errorf("sql span %q lacks server.address or db.namespace: %v", s.Name, s.Attributes)
			}
		}
	}
	if redisSpans == 0 {
		t.Errorf("no redis span is a child of the claim span; spans: %v", spanNames(spans))
	}
	if sqlSpans == 0 {
		t.Errorf("no sql span is a child of the claim span; spans: %v", spanNames(spans))
	}
}

func spanNames(spans []receivedSpan) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.scope + ":" + s.Name
	}
	return names
}

func TestPrometheus(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(t.Context(), telemetry.Config{Prometheus: true})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() { shutdown(t, p) })
	if p.Metrics == nil {
		t.Fatal("Metrics is nil with Prometheus set")
	}
	pl := newPipeline(t, p)
	stop, err := telemetry.ObservePool(p, func(ctx context.Context) (*tasks.PoolStats, error) {
		return pl.store.PoolStats(ctx, 0)
	}, time.Minute)
	if err != nil {
		t.Fatalf("observe pool: %v", err)
	}
	defer stop()
	stopStores, err := telemetry.ObserveStores(p, []telemetry.StoreCheck{
		{Name: "mysql", Check: pl.store.DB().PingContext},
		{Name: "broken", Check: func(context.Context) error { return errors.New("down") }},
	}, time.Minute)
	if err != nil {
		t.Fatalf("observe stores: %v", err)
	}
	defer stopStores()
	c := pl.editor(t, "news")
	ids := pl.add(t, "news", 2)
	pl.next(t, c, ids[0])
	sw, err := sweeper.New(pl.d, sweeper.Config{Store: pl.store, Locks: pl.locks})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sw.Sweep(t.Context()); err != nil {
		t.Fatalf("sweep: %v", err)
	}

	families := scrape(t, p.Metrics)

	// No id of any kind is a label.
	for name, f := range families {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				ln := l.GetName()
				for _, bad := range []string{"task_id", "editor_id", "holder", "fence"} {
					if strings.Contains(ln, bad) {
						t.Errorf("%s has label %s=%q", name, ln, l.GetValue())
					}
				}
				if l.GetValue() == c.Holder {
					t.Errorf("%s has the holder %q as the value of %s", name, c.Holder, ln)
				}
			}
		}
	}

	assignments := family(t, families, "taskd_assignments_total", dto.MetricType_COUNTER)
	if got := value(t, assignments, map[string]string{"taskd_task_category": "news"}); got != 1 {
		t.Errorf("taskd_assignments_total{taskd_task_category=news} = %v, want 1", got)
	}

	sweeps := family(t, families, "taskd_sweep_duration_seconds", dto.MetricType_HISTOGRAM)
	if h := metric(t, sweeps, map[string]string{"taskd_outcome": "done"}).GetHistogram(); h.GetSampleCount() != 1 {
		t.Errorf("taskd_sweep_duration_seconds{done}: count %d, want 1", h.GetSampleCount())
	}
	up := family(t, families, "taskd_store_up", dto.MetricType_GAUGE)
	if got := value(t, up, map[string]string{"taskd_store": "mysql"}); got != 1 {
		t.Errorf("taskd_store_up{mysql} = %v, want 1", got)
	}
	if got := value(t, up, map[string]string{"taskd_store": "broken"}); got != 0 {
		t.Errorf("taskd_store_up{broken} = %v, want 0", got)
	}

	latency := family(t, families, "taskd_claim_duration_seconds", dto.MetricType_HISTOGRAM)
	m := metric(t, latency, map[string]string{"taskd_outcome": "claimed"})
	if h := m.GetHistogram(); h.GetSampleCount() != 1 || len(h.GetBucket()) < 10 {
		t.Errorf("taskd_claim_duration_seconds{claimed}: count %d, %d buckets; want 1 and the dispatcher's 12",
			h.GetSampleCount(), len(h.GetBucket()))
	}

	pool := family(t, families, "taskd_pool_tasks", dto.MetricType_GAUGE)
	for status, want := range map[string]float64{"pending": 1, "assigned": 1} {
		if got := value(t, pool, map[string]string{"taskd_task_status": status, "taskd_task_category": "news"}); got != want {
			t.Errorf("taskd_pool_tasks{%s, news} = %v, want %v", status, got, want)
		}
	}
	claims := family(t, families, "taskd_pool_claims", dto.MetricType_GAUGE)
	if got := value(t, claims, map[string]string{"taskd_claim_state": "live"}); got != 1 {
		t.Errorf("taskd_pool_claims{live} = %v, want 1", got)
	}

	// The store's and Redis's client metrics are there too.
	for _, name := range []string{"db_client_operation_duration_seconds", "db_sql_connection_open"} {
		if families[name] == nil {
			t.Errorf("no %s in the exposition", name)
		}
	}
	redisMetric := false
	for name, f := range families {
		if strings.HasPrefix(name, "db_client_connection") && hasLabel(f, "db_system", "redis") {
			redisMetric = true
		}
	}
	if !redisMetric {
		t.Error("no redis connection metric in the exposition")
	}
}

// scrape GETs the Prometheus handler and parses the text exposition.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("GET /metrics: content type %q, want the text format", ct)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(rec.Body)
	if err != nil {
		t.Fatalf("parse exposition: %v", err)
	}
	return families
}

func family(t *testing.T, families map[string]*dto.MetricFamily, name string, typ dto.MetricType) *dto.MetricFamily {
	t.Helper()
	f := families[name]
	if f == nil {
		names := make([]string, 0, len(families))
		for n := range families {
			names = append(names, n)
		}
		t.Fatalf("no %s in the exposition; families: %v", name, names)
	}
	if f.GetType() != typ {
		t.Fatalf("%s is a %v, want a %v", name, f.GetType(), typ)
	}
	return f
}

// metric returns the metric of f whose labels include labels.
func metric(t *testing.T, f *dto.MetricFamily, labels map[string]string) *dto.Metric {
	t.Helper()
	for _, m := range f.Metric {
		n := 0
		for _, l := range m.Label {
			if v, ok := labels[l.GetName()]; ok && v == l.GetValue() {
				n++
			}
		}
		if n == len(labels) {
			return m
		}
	}
	t.Fatalf("%s has no metric labelled %v: %v", f.GetName(), labels, f.Metric)
	return nil
}

func value(t *testing.T, f *dto.MetricFamily, labels map[string]string) float64 {
	t.Helper()
	m := metric(t, f, labels)
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", f.GetName(), labels)
	return math.NaN()
}

func hasLabel(f *dto.MetricFamily, name, val string) bool {
	for _, m := range f.Metric {
		for _, l := range m.Label {
			if l.GetName() == name && l.GetValue() == val {
				return true
			}
		}
	}
	return false
}

func TestStdout(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p, err := telemetry.Setup(t.Context(), telemetry.Config{
		Traces: telemetry.TracesStdout, Stdout: &buf, SampleRatio: 1, ServiceName: "taskd-stdout",
	})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if p.Metrics != nil {
		t.Error("Metrics is set without Prometheus")
	}
	_, span := p.TracerProvider.Tracer("test").Start(t.Context(), "stdout.span")
	span.End()
	shutdown(t, p)

	var got struct {
		Name     string
		Resource []struct {
			Key   string
			Value struct{ Value any }
		}
	}
	if err := json.NewDecoder(&buf).Decode(&got); err != nil {
		t.Fatalf("decode stdout %q: %v", buf.String(), err)
	}
	if got.Name != "stdout.span" {
		t.Errorf("span name %q, want stdout.span", got.Name)
	}
	service := ""
	for _, kv := range got.Resource {
		if kv.Key == "service.name" {
			service, _ = kv.Value.Value.(string)
		}
	}
	if service != "taskd-stdout" {
		t.Errorf("resource service.name %q, want taskd-stdout", service)
	}
}

func TestNone(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(t.Context(), telemetry.Config{})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	if p.Metrics != nil {
		t.Error("Metrics is set without Prometheus")
	}
	_, span := p.TracerProvider.Tracer("test").Start(t.Context(), "none")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("the tracer provider records spans with traces none")
	}
	span.End()
	if err := telemetry.InstrumentRedis(testenv.Redis(t), p); err != nil {
		t.Errorf("instrument redis with no-op providers: %v", err)
	}
	stop, err := telemetry.ObservePool(p, func(context.Context) (*tasks.PoolStats, error) {
		t.Error("pool stats read with metrics off")
		return nil, nil
	}, 0)
	if err != nil {
		t.Fatalf("observe pool: %v", err)
	}
	stop()
	mux := http.NewServeMux()
	if h := telemetry.HTTPHandler(mux, p); h != http.Handler(mux) {
		t.Error("HTTPHandler wrapped the handler with no-op providers")
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func TestSetupInvalid(t *testing.T) {
	t.Parallel()
	for _, cfg := range []telemetry.Config{
		{Traces: "jaeger"},
		{Traces: telemetry.TracesStdout, SampleRatio: 1.5},
		{Traces: telemetry.TracesStdout, SampleRatio: -0.1},
		{Traces: telemetry.TracesStdout, SampleRatio: math.NaN()},
		{Traces: telemetry.TracesOTLPHTTP, Endpoint: "ftp://collector:4318"},
		{Traces: telemetry.TracesOTLPGRPC, Endpoint: "http://"},
	} {
		if _, err := telemetry.Setup(t.Context(), cfg); err == nil {
			t.Errorf("Setup(%+v) succeeded, want an error", cfg)
		}
	}
	// An endpoint no exporter reads is not checked, as in the engine's
	// configuration (telemetry.endpoint).
	p, err := telemetry.Setup(t.Context(), telemetry.Config{Traces: telemetry.TracesNone, Endpoint: "ftp://collector:4318"})
	if err != nil {
		t.Fatalf("Setup without an OTLP exporter refused its endpoint: %v", err)
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Error(err)
	}
}

func TestSampling(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	p, err := telemetry.Setup(t.Context(), telemetry.Config{Traces: telemetry.TracesStdout, Stdout: &buf, SampleRatio: 0})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	tracer := p.TracerProvider.Tracer("test")
	_, root := tracer.Start(t.Context(), "root")
	if root.SpanContext().IsSampled() {
		t.Error("a new trace was sampled at ratio 0")
	}
	root.End()
	// A sampled remote parent is followed, whatever the ratio.
	parent := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	_, child := tracer.Start(trace.ContextWithRemoteSpanContext(t.Context(), parent), "child")
	if !child.SpanContext().IsSampled() {
		t.Error("the child of a sampled parent was not sampled")
	}
	child.End()
	shutdown(t, p)
	if out := buf.String(); !strings.Contains(out, `"Name":"child"`) || strings.Contains(out, `"Name":"root"`) {
		t.Errorf("stdout has %q; want the child span only", out)
	}
}

// startNames records the name each span had when it started.
type startNames struct {
	mu    sync.Mutex
	names []string
}

func (s *startNames) OnStart(_ context.Context, sp sdktrace.ReadWriteSpan) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.names = append(s.names, sp.Name())
}
func (*startNames) OnEnd(sdktrace.ReadOnlySpan)      {}
func (*startNames) Shutdown(context.Context) error   { return nil }
func (*startNames) ForceFlush(context.Context) error { return nil }

func TestHTTPHandler(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/assignments/{task}/submit", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	// wrapped hides the mux, as a router with its own ServeHTTP does.
	wrapped := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { mux.ServeHTTP(w, r) })
	remote := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0xab}, SpanID: trace.SpanID{0xcd}, TraceFlags: trace.FlagsSampled, Remote: true,
	})

	for _, tc := range []struct {
		name      string
		h         http.Handler
		method    string
		path      string
		want      string // span name; "" for no span
		wantStart string // span name at start
		wantRoute string
	}{
		{"mux", mux, http.MethodPost, "/v1/assignments/98765/submit",
			"POST /v1/assignments/{task}/submit", "POST /v1/assignments/{task}/submit", "/v1/assignments/{task}/submit"},
		{"wrapped", wrapped, http.MethodPost, "/v1/assignments/98765/submit",
			"POST /v1/assignments/{task}/submit", "POST", "/v1/assignments/{task}/submit"},
		{"unrouted", mux, http.MethodPost, "/v1/nothing/98765", "POST", "POST", ""},
		{"probe", mux, http.MethodGet, "/healthz", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := tracetest.NewSpanRecorder()
			starts := &startNames{}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(starts), sdktrace.WithSpanProcessor(rec))
			p := &telemetry.Providers{TracerProvider: tp, Propagator: propagation.TraceContext{}}
			h := telemetry.HTTPHandler(tc.h, p)

			req := httptest.NewRequestWithContext(t.Context(), tc.method, tc.path, strings.NewReader(`{"fence":1}`))
			propagation.TraceContext{}.Inject(trace.ContextWithRemoteSpanContext(t.Context(), remote),
				propagation.HeaderCarrier(req.Header))
			h.ServeHTTP(httptest.NewRecorder(), req)

			ended := rec.Ended()
			if tc.want == "" {
				if len(ended) != 0 {
					t.Fatalf("%s %s made spans %v, want none", tc.method, tc.path, ended)
				}
				return
			}
			if len(ended) != 1 {
				t.Fatalf("%d spans, want 1", len(ended))
			}
			s := ended[0]
			if s.Name() != tc.want {
				t.Errorf("span name %q, want %q", s.Name(), tc.want)
			}
			if strings.Contains(s.Name(), "98765") {
				t.Errorf("span name %q carries the raw path", s.Name())
			}
			if len(starts.names) != 1 || starts.names[0] != tc.wantStart {
				t.Errorf("span started as %q, want %q", starts.names, tc.wantStart)
			}
			route := ""
			for _, kv := range s.Attributes() {
				if kv.Key == "http.route" {
					route = kv.Value.AsString()
				}
			}
			if route != tc.wantRoute {
				t.Errorf("http.route %q, want %q", route, tc.wantRoute)
			}
			if s.Parent().SpanID() != remote.SpanID() || s.SpanContext().TraceID() != remote.TraceID() {
				t.Errorf("span parent %v, want the caller's span %v", s.Parent(), remote)
			}
			if s.SpanKind() != trace.SpanKindServer {
				t.Errorf("span kind %v, want server", s.SpanKind())
			}
		})
	}
}

func TestHTTPMetrics(t *testing.T) {
	t.Parallel()
	p, err := telemetry.Setup(t.Context(), telemetry.Config{Prometheus: true})
	if err != nil {
		t.Fatalf("setup: %v", err)
	}
	t.Cleanup(func() { shutdown(t, p) })
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/assignments/{task}/submit", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	h := telemetry.HTTPHandler(mux, p)
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/v1/assignments/98765/submit", nil)
	req.Host = "client-chosen-host.example:9999"
	h.ServeHTTP(httptest.NewRecorder(), req)

	families := scrape(t, p.Metrics)
	f := family(t, families, "http_server_request_duration_seconds", dto.MetricType_HISTOGRAM)
	m := metric(t, f, map[string]string{"http_route": "/v1/assignments/{task}/submit", "http_response_status_code": "204"})
	if m.GetHistogram().GetSampleCount() != 1 {
		t.Errorf("http_server_request_duration_seconds count %d, want 1", m.GetHistogram().GetSampleCount())
	}
	for name, f := range families {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if v := l.GetValue(); strings.Contains(v, "98765") || strings.Contains(v, "client-chosen") || v == "9999" {
					t.Errorf("%s has label %s=%q from the request", name, l.GetName(), v)
				}
			}
		}
	}
}
