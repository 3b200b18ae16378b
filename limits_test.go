package taskd_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// Thumb is the payload of a task of category "thumb".
type Thumb struct {
	N int `json:"n"`
}

func (Thumb) Category() string { return "thumb" }

// inFlight counts the handlers running at once, and the most seen.
type inFlight struct {
	now, most atomic.Int64
	ran       atomic.Int64
}

func (f *inFlight) handler(hold time.Duration) func(ctx context.Context, job *taskd.Job[Thumb]) (any, error) {
	return func(ctx context.Context, job *taskd.Job[Thumb]) (any, error) {
		n := f.now.Add(1)
		for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
		}
		time.Sleep(hold)
		f.now.Add(-1)
		f.ran.Add(1)
		return nil, nil
	}
}

// limitEngines starts n engines over one database, each on its own pool (n
// processes), sharing a Redis key prefix, with category thumb limited to
// limit in flight and each running up to 10 tasks at once.
func limitEngines(t *testing.T, dsn, prefix string, n, limit int, f *inFlight) []*taskd.Engine {
	t.Helper()
	var es []*taskd.Engine
	for range n {
		db, err := store.Open(t.Context(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		cfg := taskd.Config{
			Categories: []taskd.CategoryConfig{{Name: "thumb", MaxInFlight: limit}},
			Worker:     taskd.WorkerConfig{Concurrency: 10},
			Dispatch:   taskd.DispatchConfig{PollInterval: 200 * time.Millisecond},
			Sweep:      taskd.SweepConfig{Schedule: "1s"},
			Redis:      taskd.RedisConfig{KeyPrefix: prefix},
		}
		e, err := taskd.New(cfg, taskd.WithDB(db), taskd.WithRedis(testenv.Redis(t)),
			taskd.WithLogger(slog.New(slog.DiscardHandler)), taskd.WithJobHandler(f.handler(5*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Stop(context.Background()) })
		es = append(es, e)
	}
	return es
}

// insertThumbs inserts n tasks of category thumb.
func insertThumbs(t *testing.T, e *taskd.Engine, n int) {
	t.Helper()
	ps := make([]taskd.InsertParams, n)
	for i := range ps {
		ps[i] = taskd.InsertParams{Args: Thumb{N: i}}
	}
	if _, err := e.InsertMany(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
}

// awaitDone waits until no task of thumb is pending or assigned.
func awaitDone(t *testing.T, db *sqlx.DB, within time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(20 * time.Millisecond) {
		var left int
		if err := db.GetContext(t.Context(), &left, `SELECT COUNT(*) FROM tasks WHERE category = 'thumb' AND status IN ('pending', 'assigned')`); err != nil {
			t.Fatal(err)
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks left after %v", left, within)
		}
	}
}

// Three engines of concurrency 10 with a category limit of 5: never more
// than 5 run at once, and all finish, through a Redis FLUSHDB mid-run (MySQL
// keeps the limit, not Redis).
func TestEngineLimitInFlightAcrossProcesses(t *testing.T) {
	const limit = 5
	dsn := storetest.NewDatabase(t)
	var f inFlight
	es := limitEngines(t, dsn, testenv.Prefix(t), 3, limit, &f)
	insertThumbs(t, es[0], 300)
	for _, e := range es {
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for f.ran.Load() < 100 {
		time.Sleep(5 * time.Millisecond)
	}
	// Redis loses every key: locks, wakes, the sweep lock.
	if err := testenv.Redis(t).FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	awaitDone(t, es[0].DBForTest(), time.Minute)
	if got := f.most.Load(); got > limit {
		t.Errorf("%d handlers ran at once, the limit is %d", got, limit)
	}
	if got := f.most.Load(); got < 2 {
		t.Errorf("at most %d handler ran at once: the limit was not reached, the test proves nothing", got)
	}
	if got := f.ran.Load(); got < 300 {
		t.Errorf("%d runs, want at least 300", got)
	}
}

// Claims of a process killed without releasing them hold their room until
// their leases pass and they are recycled or taken over; then the live
// processes do the work, never above the limit.
func TestEngineLimitHeldByAKilledProcess(t *testing.T) {
	const limit, deadLease = 3, 2 * time.Second
	dsn := storetest.NewDatabase(t)
	db, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	var f inFlight
	es := limitEngines(t, dsn, testenv.Prefix(t), 2, limit, &f)
	insertThumbs(t, es[0], 40)
	// The killed process: it claimed up to the limit and died, its leases
	// running out.
	dead, err := store.New(db, store.Config{Workflows: map[string]tasks.Workflow{"thumb": {MaxInFlight: limit}}})
	if err != nil {
		t.Fatal(err)
	}
	cands, err := dead.Candidates(t.Context(), tasks.CandidatesParams{Categories: []string{"thumb"}, Limit: limit, Primary: true})
	if err != nil {
		t.Fatal(err)
	}
	var ps []tasks.ClaimParams
	for _, c := range cands {
		ps = append(ps, tasks.ClaimParams{TaskID: c.ID, Fence: c.Fence, Status: c.Status, Holder: "killed", Lease: deadLease, Category: "thumb"})
	}
	res, err := dead.ClaimBatch(t.Context(), ps)
	if err != nil || len(res) != limit {
		t.Fatalf("the killed process's claims: %v %v", res, err)
	}
	claimedAt := time.Now()
	for _, e := range es {
		if err := e.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	// While the dead claims hold the room, nothing runs.
	time.Sleep(deadLease / 2)
	if f.ran.Load() != 0 && time.Since(claimedAt) < deadLease {
		t.Fatalf("%d tasks ran while a killed process's claims held the whole limit", f.ran.Load())
	}
	awaitDone(t, db, time.Minute)
	if got := f.most.Load(); got > limit {
		t.Errorf("%d handlers ran at once, the limit is %d", got, limit)
	}
	var results int
	if err := db.GetContext(t.Context(), &results, `SELECT COUNT(*) FROM task_results`); err != nil {
		t.Fatal(err)
	}
	if results != 40 {
		t.Errorf("%d results, want 40", results)
	}
}

// Crawl is the payload of a task of category "crawl", limited per host.
type Crawl struct {
	Host string `json:"host"`
}

func (Crawl) Category() string { return "crawl" }

// With every key backlogged, one of them with ten times the tasks of the
// others (and all of its tasks ahead of theirs), each key's share of the
// completions is within 2 points of equal: the candidate reads pass over a
// key at its limit instead of filling up with its tasks.
func TestEngineKeyLimitShares(t *testing.T) {
	const keys, keyLimit, others, window = 5, 2, 100, 300
	var mu sync.Mutex
	var order []string
	crawl := func(ctx context.Context, job *taskd.Job[Crawl]) (any, error) {
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		order = append(order, job.Args.Host)
		mu.Unlock()
		return nil, nil
	}
	e := newEngine(t, taskd.Config{
		Categories: []taskd.CategoryConfig{{Name: "crawl", KeyLimit: keyLimit}},
		Worker:     taskd.WorkerConfig{Concurrency: keys * keyLimit},
	}, taskd.WithJobHandler(crawl))
	var ps []taskd.InsertParams
	add := func(host string, n int) {
		for range n {
			ps = append(ps, taskd.InsertParams{Args: Crawl{Host: host}, Opts: &taskd.InsertOpts{LimitKey: host}})
		}
	}
	add("flood", 10*others)
	for k := 1; k < keys; k++ {
		add(fmt.Sprintf("host%d", k), others)
	}
	if _, err := e.InsertMany(t.Context(), ps); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n >= window {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d completions after 2m, want %d", n, window)
		}
	}
	mu.Lock()
	counts := map[string]int{}
	for _, h := range order[:window] {
		counts[h]++
	}
	mu.Unlock()
	for k := range keys {
		host := "flood"
		if k > 0 {
			host = fmt.Sprintf("host%d", k)
		}
		share := 100 * float64(counts[host]) / window
		if share < 100.0/keys-2 || share > 100.0/keys+2 {
			t.Errorf("%s: %.1f%% of the first %d completions, want %.0f±2%% (all: %v)", host, share, window, 100.0/keys, counts)
		}
	}
}
