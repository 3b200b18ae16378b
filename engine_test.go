package taskd_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

const testAdminToken = "test-admin-token-0123456789"

// newEngine builds an engine over a fresh database and the test Redis, with
// a key prefix of its own (unless cfg names one); handles passed in stay the
// test's.
func newEngine(t *testing.T, cfg taskd.Config, opts ...taskd.Option) *taskd.Engine {
	t.Helper()
	if cfg.Redis.KeyPrefix == "" {
		cfg.Redis.KeyPrefix = testenv.Prefix(t)
	}
	opts = append([]taskd.Option{
		taskd.WithDB(storetest.NewDB(t)),
		taskd.WithRedis(testenv.Redis(t)),
		taskd.WithLogger(slog.New(slog.DiscardHandler)),
	}, opts...)
	e, err := taskd.New(cfg, opts...)
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	return e
}

func TestEngineLifecycle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEngine(t, taskd.Config{})
	if err := e.Stop(ctx); err != nil {
		t.Fatalf("stop before start: %v", err)
	}
	if err := e.Start(ctx); !errors.Is(err, taskd.ErrStopped) {
		t.Fatalf("start after stop: %v, want ErrStopped", err)
	}

	e = newEngine(t, taskd.Config{})
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); !errors.Is(err, taskd.ErrStarted) {
		t.Fatalf("second start: %v, want ErrStarted", err)
	}
	if e.Addr() != "" {
		t.Errorf("Addr() = %q without HTTP.Addr, want none", e.Addr())
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	// Handles passed in stay open.
	if err := e.DBForTest().PingContext(ctx); err != nil {
		t.Errorf("the caller's database handle after Stop: %v", err)
	}
}

// blockingHandler runs until its context ends, and reports the start and
// the cause.
type blockingHandler struct {
	started chan int64
	causes  chan error
}

func (h *blockingHandler) ProcessTask(ctx context.Context, t *tasks.Task) (any, error) {
	h.started <- t.ID
	<-ctx.Done()
	h.causes <- context.Cause(ctx)
	return nil, ctx.Err()
}

func TestEngineStopOrder(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := &blockingHandler{started: make(chan int64, 1), causes: make(chan error, 1)}
	e := newEngine(t, taskd.Config{
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		Worker:     taskd.WorkerConfig{Concurrency: 1, ShutdownTimeout: 100 * time.Millisecond},
		AdminToken: testAdminToken,
	}, taskd.WithHandler("jobs", h))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + e.Addr()

	// An editor long-polls for a category nobody fills.
	token, hash := tasks.NewToken()
	if _, err := e.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ada", Categories: []string{"news"}, TokenHash: hash}); err != nil {
		t.Fatal(err)
	}
	polled := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", base+"/v1/assignments/next", strings.NewReader(`{"wait_ms": 60000}`))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("long poll: %v", err)
			polled <- 0
			return
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		polled <- res.StatusCode
	}()
	// A worker runs a task whose handler never finishes by itself.
	ids, err := e.InsertTasks(ctx, []tasks.NewTask{{Category: "jobs", Title: "forever"}})
	if err != nil {
		t.Fatal(err)
	}
	if id := awaitValue(t, h.started, "handler start"); id != ids[0].ID {
		t.Fatalf("handler ran task %d, want %d", id, ids[0].ID)
	}
	testenv.Eventually(t, 10*time.Second, "the long poll waits", e.WaitingForTest)

	if err := e.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// Stop returned after all of it: the long poll answered "nothing now",
	// the handler was cancelled after its grace, and its task is back.
	if code := awaitValue(t, polled, "long poll answer"); code != http.StatusNoContent {
		t.Errorf("long poll answered %d at shutdown, want 204", code)
	}
	if cause := awaitValue(t, h.causes, "handler cancellation"); cause == nil {
		t.Error("handler's context ended without a cause")
	}
	task, err := e.Task(ctx, ids[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Status != tasks.StatusPending {
		t.Errorf("task is %s after Stop, want pending (given back)", task.Status)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Error("the listener still answers after Stop")
	}
}

// awaitValue returns the value c delivers, failing the test after 10s.
func awaitValue[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: nothing within 10s", what)
		panic("unreachable")
	}
}

func TestNewRejects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  taskd.Config
		opts []taskd.Option
		key  string
		want string
	}{
		{"no dsn", taskd.Config{}, nil, "mysql.dsn", "must be set"},
		{"max wait", taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(h:3306)/d"}, HTTP: taskd.HTTPConfig{MaxWait: time.Hour}},
			nil, "http.max_wait", "must be at most 15m0s"},
		{"short token", taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(h:3306)/d"}, AdminToken: "short"},
			nil, "admin_token", "must be at least 16 characters"},
		{"category without handler", taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(h:3306)/d"}, Worker: taskd.WorkerConfig{Categories: []string{"b"}}},
			[]taskd.Option{taskd.WithHandler("a", taskd.HandlerFunc(func(context.Context, *tasks.Task) (any, error) { return nil, nil }))},
			"worker.categories", `no handler for "b"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := taskd.New(c.cfg, c.opts...)
			var ce *taskd.ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(err.Error(), c.key+": "+c.want) {
				t.Errorf("New: %v, want a *ConfigError for %s saying %q", err, c.key, c.want)
			}
		})
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(h:3306)/d"}}.WithDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	if cfg.HTTP.Addr != "" || cfg.HTTP.EditorCacheTTL <= 0 || cfg.Redis.KeyPrefix == "" || len(cfg.Redis.Addrs) != 1 {
		t.Errorf("defaults: addr %q, editor cache %v, key prefix %q, redis %v", cfg.HTTP.Addr, cfg.HTTP.EditorCacheTTL, cfg.Redis.KeyPrefix, cfg.Redis.Addrs)
	}
	// Negative turns the editor cache off; WithDefaults keeps it.
	off := taskd.Config{HTTP: taskd.HTTPConfig{EditorCacheTTL: -1}}.WithDefaults()
	if off.HTTP.EditorCacheTTL != -1 {
		t.Errorf("editor cache -1 became %v", off.HTTP.EditorCacheTTL)
	}
}

// With mysql.replica_dsn the operators' statistics come from the replica,
// while tasks are written to the primary.
func TestEngineReadsStatsFromReplica(t *testing.T) {
	t.Parallel()
	r := storetest.NewReplicated(t)
	cfg := taskd.Config{AdminToken: testAdminToken}
	cfg.MySQL.ReplicaDSN = r.ReplicaDSN
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	e, err := taskd.New(cfg, taskd.WithDB(r.Primary), taskd.WithRedis(testenv.Redis(t)), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatalf("new engine: %v", err)
	}
	t.Cleanup(func() { _ = e.Stop(context.Background()) })
	if _, err := e.InsertTasks(t.Context(), []tasks.NewTask{{Category: "news", Title: "a"}}); err != nil {
		t.Fatal(err)
	}
	storetest.CatchUp(t, r.Primary, r.ReplicaAdmin)
	// A row only the replica has (an id the primary never uses, so that
	// replication is not disturbed) shows where the statistics come from.
	if _, err := r.Replica.ExecContext(t.Context(),
		"INSERT INTO tasks (id, category, title, payload) VALUES (1000000, 'replica-only', 'x', '{}')"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "/v1/stats", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	w := httptest.NewRecorder()
	e.HTTPHandler().ServeHTTP(w, req)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"replica-only"`) || !strings.Contains(w.Body.String(), `"news"`) {
		t.Fatalf("GET /v1/stats = %d %s, want both categories, read from the replica", w.Code, w.Body.String())
	}
}

// A replica that does not answer at start is a clear error.
func TestEngineReplicaUnreachable(t *testing.T) {
	t.Parallel()
	cfg := taskd.Config{}
	cfg.MySQL.ReplicaDSN = "taskd:taskd@tcp(127.0.0.1:1)/taskd"
	_, err := taskd.New(cfg, taskd.WithDB(storetest.NewDB(t)), taskd.WithRedis(testenv.Redis(t)), taskd.WithLogger(slog.New(slog.DiscardHandler)))
	if err == nil || !strings.Contains(err.Error(), "mysql replica at 127.0.0.1:1/taskd is unreachable") {
		t.Fatalf("New with an unreachable replica: %v", err)
	}
}

// The categories of the configuration reach the store: a task added in a
// category with a workflow gets its stages and overlap.
func TestEngineCategoryWorkflows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEngine(t, taskd.Config{Categories: []taskd.CategoryConfig{
		{Name: "desk", Stages: []string{"edit", "review"}},
		{Name: "labels", Overlap: 2},
	}})
	ins, err := e.InsertTasks(ctx, []tasks.NewTask{
		{Category: "desk", Title: "story"}, {Category: "labels", Title: "photo"}, {Category: "news", Title: "plain"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		stages  string
		overlap int
	}{{"edit,review", 1}, {"", 2}, {"", 1}}
	for i, in := range ins {
		task, err := e.Task(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if task.Stages.String() != want[i].stages || task.Overlap != want[i].overlap {
			t.Errorf("task %d (%s): stages %q, overlap %d; want %q, %d", in.ID, task.Category, task.Stages, task.Overlap, want[i].stages, want[i].overlap)
		}
	}
}
