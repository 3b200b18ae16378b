package deploy_test

// The dashboard and the rules of this folder, checked against the real thing:
// promtool checks the rule files, then a real Prometheus scrapes a real
// `taskd serve` under load with the rule files loaded, and every PromQL
// expression of the dashboard and of the rules must parse and return series;
// the dashboard's latency queries must return exemplars that name a trace.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"
	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

const (
	dashboardFile = "grafana/taskd-dashboard.json"
	adminToken    = "deploy-test-admin-token-0123456789"
	// jobName is the scrape job of the test's Prometheus: the rules select
	// job="taskd", as deploy/README.md tells operators to name it.
	jobName = "taskd"
)

var ruleFiles = []string{"prometheus/recording.rules.yml", "prometheus/alerts.rules.yml"}

// lookTool finds a Prometheus binary, or skips the test (fails it under
// TASKD_TEST_REQUIRE_SERVICES=1).
func lookTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	for _, dir := range []string{"/usr/bin", "/usr/local/bin", "/usr/sbin"} {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("%s not found: install Debian's prometheus package (apt-get install prometheus; scripts/services.sh up does it as root)", name)
	if os.Getenv(testenv.RequireServicesVar) == "1" {
		t.Fatalf("%s, and %s=1", msg, testenv.RequireServicesVar)
	}
	t.Skip(msg)
	return ""
}

// TestPromtoolCheckRules checks the rule files with promtool and runs their
// unit tests (prometheus/alerts.test.yml).
func TestPromtoolCheckRules(t *testing.T) {
	t.Parallel()
	promtool := lookTool(t, "promtool")
	out, err := exec.Command(promtool, append([]string{"check", "rules"}, ruleFiles...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	for _, f := range ruleFiles {
		if !strings.Contains(string(out), "Checking "+f+"\n  SUCCESS") {
			t.Errorf("promtool did not report %s as checked:\n%s", f, out)
		}
	}

	// The rules' unit tests: the alerts fire on synthetic series that show
	// what they describe, and not on the others.
	cmd := exec.Command(promtool, "test", "rules", "alerts.test.yml")
	cmd.Dir = "prometheus"
	out, err = cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
}

// expr is one PromQL expression to evaluate, and where it comes from.
type expr struct {
	where    string
	query    string
	exemplar bool // a dashboard target that shows exemplars
}

// dashboard is the part of the Grafana JSON the test reads.
type dashboard struct {
	Templating struct {
		List []struct {
			Name  string          `json:"name"`
			Type  string          `json:"type"`
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr     string `json:"expr"`
			Exemplar bool   `json:"exemplar"`
		} `json:"targets"`
	} `json:"panels"`
}

// grafanaVars are the values the test gives the dashboard's variables.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "30s",
	"$job", jobName,
	"$category", ".*",
)

var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// dashboardExprs reads every target of the dashboard, and the series
// selectors of its label_values variables, with the variables substituted.
func dashboardExprs(t *testing.T) (exprs []expr, vars map[string]string) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	vars = map[string]string{}
	var hasDatasource bool
	for _, v := range d.Templating.List {
		switch v.Type {
		case "datasource":
			var q string
			hasDatasource = json.Unmarshal(v.Query, &q) == nil && q == "prometheus" && v.Name == "datasource"
		case "query":
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				t.Fatalf("variable %s: query: %v", v.Name, err)
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil {
				t.Fatalf("variable %s: %q is not label_values(selector, label)", v.Name, q.Query)
			}
			vars[v.Name] = m[2]
			exprs = append(exprs, expr{where: "variable " + v.Name, query: grafanaVars.Replace(m[1])})
		}
	}
	if !hasDatasource {
		t.Errorf("%s: no Prometheus datasource variable named datasource", dashboardFile)
	}
	for _, p := range d.Panels {
		for i, tg := range p.Targets {
			if tg.Expr == "" {
				t.Errorf("panel %q: target %d has no expr", p.Title, i)
				continue
			}
			exprs = append(exprs, expr{fmt.Sprintf("panel %q target %c", p.Title, 'A'+i), grafanaVars.Replace(tg.Expr), tg.Exemplar})
		}
	}
	if strings.Contains(fmt.Sprint(exprs), "$") {
		t.Fatalf("a dashboard expression has a variable the test does not substitute: %v", exprs)
	}
	return exprs, vars
}

// quantile matches a latency query: a quantile of a histogram's buckets.
var quantile = regexp.MustCompile(`^histogram_quantile\(0\.\d+,.*_bucket\{`)

// TestDashboardExemplars requires every latency panel (one with a
// histogram_quantile target) to show exemplars on exactly one of its
// quantile targets, so that a panel added without them fails, and no other
// target to ask for them. The p50 and p99 of a panel read the same buckets:
// exemplars on both would draw each point twice.
func TestDashboardExemplars(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var latency []string
	for _, p := range d.Panels {
		var quantiles, exemplars int
		for i, tg := range p.Targets {
			q := quantile.MatchString(tg.Expr)
			if q {
				quantiles++
			}
			if tg.Exemplar {
				exemplars++
				if !q {
					t.Errorf("panel %q target %c: exemplar: true on %s, not a histogram_quantile of buckets", p.Title, 'A'+i, tg.Expr)
				}
			}
		}
		if quantiles == 0 {
			continue
		}
		latency = append(latency, p.Title)
		if exemplars != 1 {
			t.Errorf("panel %q: %d quantile targets, %d with exemplar: true; want exactly one (its p99)", p.Title, quantiles, exemplars)
		}
	}
	for _, want := range []string{"Next latency (claim)", "Next latency (HTTP)"} {
		if !slices.Contains(latency, want) {
			t.Errorf("panel %q is not among the latency panels %q", want, latency)
		}
	}
	t.Logf("latency panels with exemplars: %q", latency)
}

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record      string            `yaml:"record"`
			Alert       string            `yaml:"alert"`
			Expr        string            `yaml:"expr"`
			For         string            `yaml:"for"`
			Labels      map[string]string `yaml:"labels"`
			Annotations map[string]string `yaml:"annotations"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

var (
	// setOp splits an alert condition into its operands.
	setOp = regexp.MustCompile(`\s+(and|unless|or)(\s+on\s*\([^)]*\))?\s+`)
	// threshold is the comparison with a number that ends an operand.
	threshold = regexp.MustCompile(`\s*(==|!=|>=|<=|>|<)\s*[0-9.e+-]+$`)
)

// ruleExprs reads the rules: a recording rule's expression is evaluated as it
// is. An alert's expression is a condition, empty while nothing fires, so
// the test evaluates each operand of it with its threshold comparison taken
// off: the series the alert compares, which must exist.
func ruleExprs(t *testing.T) (exprs []expr, rules int) {
	t.Helper()
	for _, f := range ruleFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rf ruleFile
		if err := yaml.Unmarshal(b, &rf); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				rules++
				if r.Record != "" {
					exprs = append(exprs, expr{where: "record " + r.Record, query: r.Expr})
					continue
				}
				where := "alert " + r.Alert
				if r.For == "" || r.Labels["severity"] == "" {
					t.Errorf("%s: needs for: and a severity label", where)
				}
				for _, a := range []string{"summary", "description", "runbook"} {
					if r.Annotations[a] == "" {
						t.Errorf("%s: no %s annotation", where, a)
					}
				}
				for i, operand := range setOp.Split(strings.TrimSpace(r.Expr), -1) {
					stripped := threshold.ReplaceAllString(operand, "")
					if stripped == operand {
						t.Errorf("%s: operand %q compares with no number", where, operand)
					}
					exprs = append(exprs, expr{where: fmt.Sprintf("%s operand %d without its threshold", where, i+1), query: stripped})
				}
			}
		}
	}
	return exprs, rules
}

// identifier matches the metric and label names of taskd's the expressions use.
var identifier = regexp.MustCompile(`\b(?:taskd|db|http)_[a-z_]+\b`)

// TestPrometheusEvaluatesDashboardAndRules runs a real Prometheus scraping a
// real `taskd serve` under load with the rule files loaded, and requires
// every expression of the dashboard and of the rules to parse and return
// series, every metric they name to exist, and every rule to be healthy.
func TestPrometheusEvaluatesDashboardAndRules(t *testing.T) {
	t.Parallel()
	promBin := lookTool(t, "prometheus")
	start := time.Now()

	dashExprs, vars := dashboardExprs(t)
	rExprs, nRules := ruleExprs(t)

	ts := startTaskd(t)
	prom := startPrometheus(t, promBin, ts.addr)
	ts.load(t)

	// Every name the expressions use must be a metric or a label Prometheus
	// has from taskd, and every metric must have series: a misspelt name
	// would otherwise hide behind an "or ... * 0" fallback.
	deadline := time.Now().Add(45 * time.Second)
	prom.waitSeries(t, expr{where: "taskd scraped 5 times", query: fmt.Sprintf(`count_over_time(up{job=%q}[1m]) >= 5`, jobName)}, deadline)
	metrics, labels := prom.values(t, "__name__"), prom.labels(t)
	names := map[string]bool{}
	for _, e := range append(slices.Clone(dashExprs), rExprs...) {
		for _, n := range identifier.FindAllString(e.query, -1) {
			names[n] = true
		}
	}
	var checked int
	for _, n := range slices.Sorted(maps.Keys(names)) {
		switch {
		case labels[n]:
		case metrics[n]:
			checked++
			prom.waitSeries(t, expr{where: "metric " + n, query: fmt.Sprintf(`count({__name__=%q, job=%q})`, n, jobName)}, deadline)
		default:
			t.Errorf("%s is neither a metric nor a label of taskd's", n)
		}
	}

	// Every dashboard target and variable returns series; a variable's
	// series carry the label it lists.
	for _, e := range dashExprs {
		res := prom.waitSeries(t, e, deadline)
		if strings.HasPrefix(e.where, "variable ") {
			label := vars[strings.TrimPrefix(e.where, "variable ")]
			if res[0].Metric[label] == "" {
				t.Errorf("%s: series %v have no label %s", e.where, res[0].Metric, label)
			}
		}
	}
	for _, e := range rExprs {
		prom.waitSeries(t, e, deadline)
	}

	// Every dashboard target that shows exemplars has some, each naming
	// the trace of a measurement: taskd samples every trace, and Prometheus
	// stores the exemplars of its OpenMetrics exposition.
	var exemplars int
	for _, e := range dashExprs {
		if e.exemplar {
			exemplars++
			prom.waitExemplars(t, e, start, deadline)
		}
	}
	if exemplars == 0 {
		t.Error("no dashboard target shows exemplars")
	}

	// The queue and worker series say what the load did: the overdue task
	// of archive, claimable for a while; the wordcount runs by outcome; the
	// claims' queue waits; the workers' free slots.
	for _, q := range []string{
		fmt.Sprintf(`taskd_overdue_tasks{job=%q, taskd_task_category="archive"} == 1`, jobName),
		fmt.Sprintf(`taskd_oldest_claimable_age_seconds{job=%q, taskd_task_category="archive"} > 0`, jobName),
		fmt.Sprintf(`taskd:overdue_tasks:max{job=%q, taskd_task_category="archive"} == 1`, jobName),
		fmt.Sprintf(`taskd_worker_runs_total{job=%q, taskd_task_category="wordcount", taskd_outcome="done"} == 5`, jobName),
		fmt.Sprintf(`taskd_worker_runs_total{job=%q, taskd_task_category="wordcount", taskd_outcome="dead"} == 1`, jobName),
		fmt.Sprintf(`taskd_worker_run_duration_seconds_count{job=%q, taskd_task_category="wordcount"} == 6`, jobName),
		fmt.Sprintf(`sum(taskd_worker_claim_batch_sum{job=%q}) == 6`, jobName),
		fmt.Sprintf(`taskd_queue_wait_seconds_count{job=%q, taskd_task_category="wordcount"} == 6`, jobName),
		fmt.Sprintf(`taskd_queue_wait_seconds_count{job=%q, taskd_task_category="news"} > 0`, jobName),
		fmt.Sprintf(`taskd_worker_slots_free{job=%q} > 0 and taskd_worker_running{job=%q} == 0 and taskd_worker_backlog{job=%q} == 0`, jobName, jobName, jobName),
	} {
		prom.waitSeries(t, expr{where: "load's series", query: q}, deadline)
	}

	// Prometheus loaded every rule and evaluates each without error.
	prom.waitRulesHealthy(t, nRules, deadline)
	t.Logf("%d dashboard expressions (%d with exemplars), %d rule expressions and %d metric names checked in %v",
		len(dashExprs), exemplars, len(rExprs), checked, time.Since(start).Round(100*time.Millisecond))
}

// ---------------------------------------------------------------------------
// taskd

type taskd struct {
	addr   string // host:port
	base   string // http://addr
	stderr *testenv.LockedBuffer
	db     *sqlx.DB      // its database
	rdb    *redis.Client // its Redis server
	prefix string        // its Redis key prefix
}

// startTaskd builds the binary and runs `taskd serve` against the test
// services (a database and a Redis key prefix of its own), with 1s sweeps, a
// 2s lease and a webhook to a receiver in the test, so that the webhook
// gauges exist.
func startTaskd(t *testing.T) *taskd {
	t.Helper()
	dsn := storetest.NewDatabase(t)
	opt, err := redis.ParseURL(testenv.Lookup(t, testenv.RedisURLVar))
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.RedisURLVar, err)
	}
	prefix := testenv.Prefix(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	dir := t.TempDir()

	var hooks atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		hooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	config := filepath.Join(dir, "config.yaml")
	yml := fmt.Sprintf(`webhooks:
  - name: deploy-test
    url: %s/hooks
    events: [submitted, released]
    secret: deploy-test-secret-0123456789
webhook_delivery:
  poll_interval: 100ms
`, receiver.URL)
	if err := os.WriteFile(config, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}

	srv := testenv.StartServe(t, "../cmd/taskd",
		"TASKD_CONFIG="+config,
		"TASKD_MYSQL_DSN="+dsn,
		"TASKD_REDIS_ADDRS="+opt.Addr,
		"TASKD_REDIS_KEY_PREFIX="+prefix,
		"TASKD_ADMIN_TOKEN="+adminToken,
		"TASKD_SWEEP_INTERVAL=1s",
		"TASKD_LEASE_TTL=2s",
		// Webhook deliveries purged a second after they end, so that the
		// retention metrics have series (done tasks are kept: the load
		// writes about some of them later).
		"TASKD_RETENTION_WEBHOOKS=1s",
		// Workers in the process run the binary's wordcount handler, so
		// that the worker metrics exist.
		"TASKD_WORKER_IN_SERVE=true",
		"TASKD_WORKER_CATEGORIES=wordcount",
		// Every trace sampled, so that every latency measurement made
		// under a span carries an exemplar; the spans go to stdout,
		// discarded.
		"TASKD_TELEMETRY_TRACES=stdout",
		"TASKD_TELEMETRY_SAMPLE_RATIO=1",
	)
	return &taskd{addr: srv.Addr, base: "http://" + srv.Addr, stderr: srv.Stderr, db: db, rdb: rdb, prefix: prefix}
}

// try sends a JSON request and returns the status and body; it may be
// called from any goroutine.
func (s *taskd) try(method, path, token string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(b))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode, out, nil
}

// call is try that fails the test on a transport error.
func (s *taskd) call(t *testing.T, method, path, token string, body any) (int, []byte) {
	t.Helper()
	status, b, err := s.try(method, path, token, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, b
}

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

type assignment struct {
	Task struct {
		ID int64 `json:"id"`
	} `json:"task"`
	Fence int64 `json:"fence"`
}

// load drives the API for a few seconds: four editors of two categories
// claim and submit (every fifth released) from a pool of 4,000 tasks, one
// claim is left to expire and be recycled by a sweep, and its holder's late
// submit is refused as stale. Then it causes a lock conflict and a claim
// MySQL refuses, so that every counter the dashboard reads has series.
func (s *taskd) load(t *testing.T) {
	t.Helper()
	cats := []string{"news", "sports"}
	var batch []map[string]any
	for i := range 4000 {
		batch = append(batch, map[string]any{"category": cats[i%2], "title": fmt.Sprintf("t%d", i), "priority": i % 7, "payload": map[string]any{}})
	}
	s.expect(t, http.StatusCreated, "POST", "/v1/tasks", adminToken, batch, nil)

	newEditor := func(name string, categories ...string) string {
		var e struct {
			Token string `json:"token"`
		}
		s.expect(t, http.StatusCreated, "POST", "/v1/editors", adminToken, map[string]any{"name": name, "categories": categories}, &e)
		return e.Token
	}

	// The claim left to expire.
	idle := newEditor("idle", "news")
	var held assignment
	s.expect(t, http.StatusOK, "POST", "/v1/assignments/next", idle, map[string]any{}, &held)

	var wg sync.WaitGroup
	var claims atomic.Int64
	stop := time.Now().Add(4 * time.Second)
	for i := range 4 {
		token := newEditor(fmt.Sprintf("editor%d", i), cats...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(stop); n++ {
				var a assignment
				status, b, err := s.try("POST", "/v1/assignments/next", token, map[string]any{})
				if err == nil && status == http.StatusNoContent {
					return // the pool ran dry: the claims so far are load enough
				}
				if err != nil || status != http.StatusOK || json.Unmarshal(b, &a) != nil {
					t.Errorf("next: %d %s %v", status, b, err)
					return
				}
				claims.Add(1)
				op, body := "submit", map[string]any{"fence": a.Fence, "result": map[string]any{"n": n}}
				if n%5 == 4 {
					op, body = "release", map[string]any{"fence": a.Fence}
				}
				status, b, err = s.try("POST", fmt.Sprintf("/v1/assignments/%d/%s", a.Task.ID, op), token, body)
				if err != nil || (status != http.StatusOK && status != http.StatusNoContent) {
					t.Errorf("%s: %d %s %v", op, status, b, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if claims.Load() < 8 {
		t.Fatalf("only %d claims in 4s", claims.Load())
	}

	// The idle claim expired 2s after it was taken; a sweep (every 1s) takes
	// it back, and the late submit is refused as stale.
	testenv.Eventually(t, 30*time.Second, "the sweep recycles the expired claim", func() bool {
		return s.hasMetric(t, "taskd_claims_recycled_total")
	})
	status, b := s.call(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", held.Task.ID), idle, map[string]any{"fence": held.Fence, "result": "late"})
	if status != http.StatusConflict {
		t.Fatalf("submit of the expired claim: %d %s, want 409", status, b)
	}
	s.lockConflict(t, newEditor)
	s.refusedClaim(t, newEditor)

	// The workers run wordcount tasks: five done, one dead (a payload
	// without a text, one attempt). A task of a category nobody takes is
	// past its due_at: overdue, and the oldest claimable of its category.
	var jobs []map[string]any
	for i := range 5 {
		jobs = append(jobs, map[string]any{"category": "wordcount", "title": fmt.Sprintf("w%d", i), "payload": map[string]any{"text": "a few words"}})
	}
	jobs = append(jobs,
		map[string]any{"category": "wordcount", "title": "no text", "payload": map[string]any{}, "max_attempts": 1},
		map[string]any{"category": "archive", "title": "overdue", "payload": map[string]any{}, "due_at": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)})
	s.expect(t, http.StatusCreated, "POST", "/v1/tasks", adminToken, jobs, nil)
	testenv.Eventually(t, 30*time.Second, "the workers run the wordcount tasks", func() bool {
		return s.hasMetric(t, "taskd_worker_runs_total")
	})
	t.Logf("load: %d claims by 4 editors in 4s, one claim expired and recycled, a lock conflict, a refused claim, 6 worker runs, an overdue task", claims.Load())
}

// hasMetric reports whether taskd's /metrics has a series of name.
func (s *taskd) hasMetric(t *testing.T, name string) bool {
	t.Helper()
	resp, err := http.Get(s.base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Contains(b, []byte("\n"+name+"{"))
}

// addTasks adds tasks of category with the given priorities and returns
// their ids.
func (s *taskd) addTasks(t *testing.T, category string, priorities ...int) []int64 {
	t.Helper()
	var batch []map[string]any
	for i, p := range priorities {
		batch = append(batch, map[string]any{"category": category, "title": fmt.Sprint(i), "priority": p, "payload": map[string]any{}})
	}
	var out struct {
		IDs []int64 `json:"ids"`
	}
	s.expect(t, http.StatusCreated, "POST", "/v1/tasks", adminToken, batch, &out)
	return out.IDs
}

// lockConflict takes the Redis locks of every task of a new category, as a
// competitor would, and asks for a task of it: each candidate is found
// locked. The sweeper removes locks that belong to no claim, so an attempt
// whose locks it removed first is tried again with a new category.
func (s *taskd) lockConflict(t *testing.T, newEditor func(string, ...string) string) {
	t.Helper()
	ctx := context.Background()
	for attempt := range 5 {
		category := fmt.Sprintf("locked%d", attempt)
		ids := s.addTasks(t, category, 3, 2, 1)
		token := newEditor(category, category)
		keys := make([]string, len(ids))
		for i, id := range ids {
			keys[i] = fmt.Sprintf("%stask:{%d}", s.prefix, id)
			if err := s.rdb.Set(ctx, keys[i], "a-competitor", 10*time.Second).Err(); err != nil {
				t.Fatal(err)
			}
		}
		status, b := s.call(t, "POST", "/v1/assignments/next", token, map[string]any{"wait_ms": 0})
		if err := s.rdb.Del(ctx, keys...).Err(); err != nil {
			t.Fatal(err)
		}
		if status == http.StatusNoContent && s.hasMetric(t, "taskd_lock_conflicts_total") {
			return
		}
		t.Logf("lock conflict attempt %d: next answered %d %s", attempt+1, status, b)
	}
	t.Fatal("no taskd_lock_conflicts_total after 5 claims of tasks locked in Redis")
}

// refusedClaim makes MySQL refuse a claim whose Redis lock was obtained, as
// a lagging replica or another writer would: an editor claims the first of
// three tasks, which reads the other two into the candidate pool, the two
// are cancelled in MySQL behind taskd's back, and the submit's next claim
// tries one of them.
func (s *taskd) refusedClaim(t *testing.T, newEditor func(string, ...string) string) {
	t.Helper()
	for attempt := range 5 {
		category := fmt.Sprintf("refused%d", attempt)
		ids := s.addTasks(t, category, 9, 5, 1)
		token := newEditor(category, category)
		var a assignment
		s.expect(t, http.StatusOK, "POST", "/v1/assignments/next", token, map[string]any{}, &a)
		if a.Task.ID != ids[0] {
			t.Fatalf("claimed task %d, want %d", a.Task.ID, ids[0])
		}
		if _, err := s.db.Exec("UPDATE tasks SET status = 'cancelled' WHERE id IN (?, ?) AND status = 'pending'", ids[1], ids[2]); err != nil {
			t.Fatal(err)
		}
		var next struct {
			Next *assignment `json:"next"`
		}
		s.expect(t, http.StatusOK, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), token,
			map[string]any{"fence": a.Fence, "result": "ok"}, &next)
		if next.Next != nil {
			t.Fatalf("the submit handed out task %d, which is cancelled", next.Next.Task.ID)
		}
		if s.hasMetric(t, "taskd_claims_refused_total") {
			return
		}
		t.Logf("refused claim attempt %d: no refusal counted", attempt+1)
	}
	t.Fatal("no taskd_claims_refused_total after 5 claims of tasks cancelled behind taskd's back")
}

// ---------------------------------------------------------------------------
// Prometheus

type prometheus struct {
	base string
}

// startPrometheus runs Prometheus on a free loopback port with a data
// directory of its own, scraping addr every second as job "taskd" and
// evaluating the rule files every second. It is stopped when the test ends.
func startPrometheus(t *testing.T, bin, addr string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	var rules []string
	for _, f := range ruleFiles {
		abs, err := filepath.Abs(f)
		if err != nil {
			t.Fatal(err)
		}
		rules = append(rules, fmt.Sprintf("%q", abs))
	}
	config := filepath.Join(dir, "prometheus.yml")
	yml := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%s]
scrape_configs:
  - job_name: %s
    static_configs:
      - targets: [%q]
`, strings.Join(rules, ", "), jobName, addr)
	if err := os.WriteFile(config, []byte(yml), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	_ = l.Close()

	cmd := exec.Command(bin,
		"--config.file="+config,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen,
		"--log.level=warn",
		"--enable-feature=exemplar-storage")
	log := &testenv.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("prometheus log:\n%s", log.String())
		}
	})
	p := &prometheus{base: "http://" + listen}
	testenv.Eventually(t, 30*time.Second, "prometheus answers /-/ready", func() bool {
		select {
		case <-done:
			t.Fatalf("prometheus exited:\n%s", log.String())
		default:
		}
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

type series struct {
	Metric map[string]string `json:"metric"`
}

// query evaluates q at the current time; a query Prometheus cannot parse or
// run fails the test.
func (p *prometheus) query(t *testing.T, q string) []series {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", p.base+"/api/v1/query", strings.NewReader(url.Values{"query": {q}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	defer resp.Body.Close()
	var out struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string   `json:"resultType"`
			Result     []series `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("query %s: decode: %v", q, err)
	}
	if out.Status != "success" {
		t.Fatalf("query %s: %s: %s", q, out.ErrorType, out.Error)
	}
	if out.Data.ResultType != "vector" {
		t.Fatalf("query %s: result type %s, want vector", q, out.Data.ResultType)
	}
	return out.Data.Result
}

// waitSeries evaluates e until it returns at least one series, and fails the
// test when it still returns none at the deadline.
func (p *prometheus) waitSeries(t *testing.T, e expr, deadline time.Time) []series {
	t.Helper()
	for {
		if res := p.query(t, e.query); len(res) > 0 {
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no series:\n%s", e.where, e.query)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// traceID is an exemplar's trace_id: 16 bytes in hex, not all zero.
var traceID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// waitExemplars queries the exemplars of e's series since start until there
// are some, and fails the test when there are none at the deadline, or when
// one has no trace_id.
func (p *prometheus) waitExemplars(t *testing.T, e expr, start, deadline time.Time) {
	t.Helper()
	for {
		v := url.Values{"query": {e.query}, "start": {strconv.FormatInt(start.Add(-time.Minute).Unix(), 10)},
			"end": {strconv.FormatInt(time.Now().Add(time.Minute).Unix(), 10)}}
		var out struct {
			Status string `json:"status"`
			Error  string `json:"error"`
			Data   []struct {
				SeriesLabels map[string]string `json:"seriesLabels"`
				Exemplars    []struct {
					Labels map[string]string `json:"labels"`
				} `json:"exemplars"`
			} `json:"data"`
		}
		p.get(t, "/api/v1/query_exemplars?"+v.Encode(), &out)
		if out.Status != "success" {
			t.Fatalf("%s: query_exemplars: %s", e.where, out.Error)
		}
		var n int
		for _, s := range out.Data {
			for _, ex := range s.Exemplars {
				n++
				if id := ex.Labels["trace_id"]; !traceID.MatchString(id) || strings.Trim(id, "0") == "" {
					t.Errorf("%s: exemplar of %v has trace_id %q, want a trace id", e.where, s.SeriesLabels, id)
				}
			}
		}
		if n > 0 {
			t.Logf("%s: %d exemplars in %d series", e.where, n, len(out.Data))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no exemplars:\n%s", e.where, e.query)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitRulesHealthy waits until Prometheus lists n rules and has evaluated
// each without error.
func (p *prometheus) waitRulesHealthy(t *testing.T, n int, deadline time.Time) {
	t.Helper()
	for {
		resp, err := http.Get(p.base + "/api/v1/rules")
		if err != nil {
			t.Fatal(err)
		}
		var out struct {
			Data struct {
				Groups []struct {
					Rules []struct {
						Name      string `json:"name"`
						Health    string `json:"health"`
						LastError string `json:"lastError"`
					} `json:"rules"`
				} `json:"groups"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var seen, ok int
		var bad []string
		for _, g := range out.Data.Groups {
			for _, r := range g.Rules {
				seen++
				if r.Health == "ok" {
					ok++
				} else {
					bad = append(bad, fmt.Sprintf("%s: %s %s", r.Name, r.Health, r.LastError))
				}
			}
		}
		if seen == n && ok == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus has %d rules, %d healthy, want %d: %v", seen, ok, n, bad)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// get reads a JSON answer of Prometheus' API into out.
func (p *prometheus) get(t *testing.T, path string, out any) {
	t.Helper()
	resp, err := http.Get(p.base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// values returns the values label has in Prometheus.
func (p *prometheus) values(t *testing.T, label string) map[string]bool {
	t.Helper()
	var out struct {
		Data []string `json:"data"`
	}
	p.get(t, "/api/v1/label/"+label+"/values", &out)
	m := map[string]bool{}
	for _, v := range out.Data {
		m[v] = true
	}
	return m
}

// labels returns the label names Prometheus has.
func (p *prometheus) labels(t *testing.T) map[string]bool {
	t.Helper()
	var out struct {
		Data []string `json:"data"`
	}
	p.get(t, "/api/v1/labels", &out)
	m := map[string]bool{}
	for _, v := range out.Data {
		m[v] = true
	}
	return m
}
