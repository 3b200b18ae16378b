package taskd_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/dispatcher/webhook"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// note is a worker's task; article an editor's.
type note struct {
	Text string `json:"text"`
}

func (note) Category() string { return "notes" }

type article struct {
	Headline string `json:"headline"`
}

func (article) Category() string { return "news" }

// longPoll starts an editor's long poll (wait_ms 60000) on the engine's
// listener and returns the channel of its answer: the status and the body.
func longPoll(t *testing.T, e *taskd.Engine, token string) <-chan string {
	t.Helper()
	answer := make(chan string, 1)
	go func() {
		req, _ := http.NewRequestWithContext(t.Context(), "POST", "http://"+e.Addr()+"/v1/assignments/next", strings.NewReader(`{"wait_ms": 60000}`))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answer <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		answer <- res.Status + " " + string(b)
	}()
	return answer
}

// newEditor creates an editor of news and returns its token.
func newEditor(t *testing.T, e *taskd.Engine) string {
	t.Helper()
	token, hash := tasks.NewToken()
	if _, err := e.CreateEditor(t.Context(), tasks.CreateEditorParams{Name: "ada", Categories: []string{"news"}, TokenHash: hash}); err != nil {
		t.Fatal(err)
	}
	return token
}

// wakeUps subscribes to the engine's wake-ups between processes (the key
// prefix's "wake" channel) and returns the channel of their payloads.
func wakeUps(t *testing.T, prefix string) <-chan string {
	t.Helper()
	sub := testenv.Redis(t).Subscribe(t.Context(), prefix+"wake")
	if _, err := sub.Receive(t.Context()); err != nil { // the subscription's confirmation
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	out := make(chan string, 1024)
	go func() {
		for m := range sub.Channel() {
			out <- m.Payload
		}
	}()
	return out
}

// TestInsertTxCommitWakes: tasks inserted in the caller's transaction are
// seen by nobody while it is open; its COMMIT alone wakes an idle worker and
// a long-polling editor at once (the poll interval is an hour), and
// publishes the wake-up to other processes as Insert does.
func TestInsertTxCommitWakes(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := taskd.Config{AdminToken: testAdminToken, Worker: taskd.WorkerConfig{Concurrency: 1}}
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Dispatch.PollInterval = time.Hour // no look of the poll's own
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	ran := make(chan int64, 4)
	e := newEngine(t, cfg, taskd.WithJobHandler(func(_ context.Context, job *taskd.Job[note]) (any, error) {
		ran <- job.ID
		return nil, nil
	}))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wakes := wakeUps(t, cfg.Redis.KeyPrefix)
	answer := longPoll(t, e, newEditor(t, e))
	testenv.Eventually(t, 10*time.Second, "the worker and the editor wait", func() bool { return e.WaitersForTest() >= 2 })

	tx, err := e.DBForTest().BeginTxx(ctx, nil) // a *sqlx.Tx
	if err != nil {
		t.Fatal(err)
	}
	ids, err := e.InsertManyTx(ctx, tx, []taskd.InsertParams{{Args: note{Text: "hello"}}, {Args: article{Headline: "Budget vote tonight"}}})
	if err != nil || len(ids) != 2 {
		t.Fatalf("insert in the transaction: %v, %v", ids, err)
	}
	select {
	case id := <-ran:
		t.Fatalf("task %d ran before its transaction committed", id)
	case got := <-answer:
		t.Fatalf("the editor was answered before the transaction committed: %s", got)
	case w := <-wakes:
		t.Fatalf("a wake-up before the transaction committed: %s", w)
	case <-time.After(300 * time.Millisecond):
	}
	if _, err := e.Task(ctx, ids[0]); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("task %d outside the open transaction: %v, want ErrNotFound", ids[0], err)
	}
	committed := time.Now()
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-ran:
		if id != ids[0] {
			t.Errorf("the worker ran task %d, want %d", id, ids[0])
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the worker did not claim the committed task within 5s")
	}
	select {
	case got := <-answer:
		if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, "Budget vote tonight") {
			t.Errorf("the long poll answered %q, want 200 with the article", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll was not answered within 5s of the commit")
	}
	t.Logf("commit to claim and answer: %v", time.Since(committed))
	select {
	case w := <-wakes:
		var counts map[string]int
		if err := json.Unmarshal([]byte(w), &counts); err != nil || counts["notes"] != 1 || counts["news"] != 1 {
			t.Errorf("wake-up %s, want one task of notes and one of news", w)
		}
	case <-time.After(5 * time.Second):
		t.Error("no wake-up published for the other processes")
	}

	// A *sql.Tx does as well.
	stx, err := e.DBForTest().DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := e.InsertTx(ctx, stx, note{Text: "again"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := stx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ran:
		if got != id {
			t.Errorf("the worker ran task %d, want %d", got, id)
		}
	case <-time.After(5 * time.Second):
		// Where it stuck: the task's state, the commit waiters, the callers
		// waiting for tasks.
		task, err := e.Task(ctx, id)
		queued, running := e.CommitWaitersForTest()
		t.Fatalf("the worker did not claim the task of a *sql.Tx within 5s of its commit: task %+v (%v); commit waiters %d queued, %d running; %d callers waiting",
			task, err, queued, running, e.WaitersForTest())
	}
	testenv.Eventually(t, 5*time.Second, "the commit waiters end with nothing to watch", func() bool {
		queued, running := e.CommitWaitersForTest()
		return queued == 0 && running == 0
	})
}

// TestInsertTxRollbackLeavesNoTrace races a busy worker and a long-polling
// editor against many transactions that insert tasks and roll back: none of
// those tasks runs, is answered, is published as a wake-up, or leaves a row,
// an event, a webhook or a Redis key; the tasks committed afterwards all are.
func TestInsertTxRollbackLeavesNoTrace(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	const secret = "inserttx-webhook-secret"
	var mu sync.Mutex
	hooked := map[int64]bool{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		mu.Lock()
		hooked[ev.Data.TaskID] = true
		mu.Unlock()
	}))
	t.Cleanup(rc.Close)
	cfg := taskd.Config{AdminToken: testAdminToken, Worker: taskd.WorkerConfig{Concurrency: 4},
		Webhooks:        []taskd.WebhookConfig{{Name: "sink", URL: rc.URL, Events: []string{taskd.WebhookSubmitted}, Secret: secret}},
		WebhookDelivery: taskd.WebhookDeliveryConfig{PollInterval: 20 * time.Millisecond}}
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Dispatch.PollInterval = 100 * time.Millisecond // claims look often
	cfg.Redis.KeyPrefix = testenv.Prefix(t)
	var ranMu sync.Mutex
	ran := map[int64]bool{}
	e := newEngine(t, cfg, taskd.WithJobHandler(func(_ context.Context, job *taskd.Job[note]) (any, error) {
		ranMu.Lock()
		ran[job.ID] = true
		ranMu.Unlock()
		return nil, nil
	}))
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	wakes := wakeUps(t, cfg.Redis.KeyPrefix)
	answer := longPoll(t, e, newEditor(t, e))
	testenv.Eventually(t, 10*time.Second, "the worker and the editor wait", func() bool { return e.WaitersForTest() >= 2 })

	// Rolled back: 4 callers, 25 transactions each, each open for a while
	// with its tasks inserted.
	var rolledMu sync.Mutex
	var rolled []int64
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := range 25 {
				tx, err := e.DBForTest().BeginTxx(ctx, nil)
				if err != nil {
					t.Error(err)
					return
				}
				ids, err := e.InsertManyTx(ctx, tx, []taskd.InsertParams{
					{Args: note{Text: fmt.Sprint(c, i)}},
					{Args: article{Headline: "never"}, Opts: &taskd.InsertOpts{Key: fmt.Sprintf("k-%d-%d", c, i)}},
				})
				if err != nil {
					t.Error(err)
					_ = tx.Rollback()
					return
				}
				time.Sleep(time.Duration(i%5) * 5 * time.Millisecond)
				if err := tx.Rollback(); err != nil {
					t.Error(err)
				}
				rolledMu.Lock()
				rolled = append(rolled, ids...)
				rolledMu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(rolled) != 200 {
		t.Fatalf("%d tasks inserted and rolled back, want 200", len(rolled))
	}
	// Whatever a rollback could have leaked has had the time to show.
	select {
	case got := <-answer:
		t.Fatalf("the editor was answered a rolled-back task: %s", got)
	case w := <-wakes:
		t.Fatalf("a wake-up for a rolled-back insert: %s", w)
	case <-time.After(500 * time.Millisecond):
	}

	// Committed: the same path is seen, so the checks above could fail.
	tx, err := e.DBForTest().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := e.InsertManyTx(ctx, tx, []taskd.InsertParams{{Args: note{Text: "kept"}}, {Args: article{Headline: "kept"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-answer:
		if !strings.HasPrefix(got, "200 ") || !strings.Contains(got, fmt.Sprintf(`"id":%d`, kept[1])) {
			t.Errorf("the long poll answered %q, want the committed article %d", got, kept[1])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long poll was not answered the committed article")
	}
	testenv.Eventually(t, 20*time.Second, "the committed note runs and its webhook arrives", func() bool {
		ranMu.Lock()
		defer ranMu.Unlock()
		mu.Lock()
		defer mu.Unlock()
		return ran[kept[0]] && hooked[kept[0]]
	})
	ranMu.Lock()
	mu.Lock()
	for _, id := range rolled {
		if ran[id] || hooked[id] {
			t.Errorf("rolled-back task %d: ran %v, webhook %v", id, ran[id], hooked[id])
		}
	}
	mu.Unlock()
	ranMu.Unlock()

	db := e.DBForTest()
	for _, table := range []string{"tasks WHERE id", "task_events WHERE task_id", "task_results WHERE task_id", "webhook_outbox WHERE task_id"} {
		q, args, err := sqlx.In("SELECT COUNT(*) FROM "+table+" IN (?)", rolled)
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.GetContext(ctx, &n, q, args...); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Errorf("%d rows in %s of the rolled-back tasks, want 0", n, strings.Fields(table)[0])
		}
	}
	rdb := testenv.Redis(t)
	for _, id := range rolled {
		if n, err := rdb.Exists(ctx, fmt.Sprintf("%stask:{%d}", cfg.Redis.KeyPrefix, id)).Result(); err != nil || n != 0 {
			t.Errorf("a lock key of rolled-back task %d: %d, %v", id, n, err)
		}
	}
	for {
		select {
		case w := <-wakes:
			var counts map[string]int
			if err := json.Unmarshal([]byte(w), &counts); err != nil || counts["notes"] > 1 || counts["news"] > 1 {
				t.Errorf("wake-up %s, want only the committed tasks'", w)
			}
			continue
		default:
		}
		break
	}
}

// TestInsertTxKeys: a key is held inside the transaction that inserted it
// (a second insert there returns the first), by a committed task, and a key
// another open transaction inserted makes InsertTx wait for it, then answer
// ErrBusy when it committed: the caller retries its transaction, which then
// finds the holder.
func TestInsertTxKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEngine(t, taskd.Config{})
	db := e.DBForTest()
	opts := &taskd.InsertOpts{Key: "order-7"}

	tx, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	first, err := e.InsertTx(ctx, tx, note{Text: "a"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.InsertTx(ctx, tx, note{Text: "b"}, opts)
	if err != nil || again != first {
		t.Fatalf("second insert of the key in the same transaction: %d, %v; want %d", again, err, first)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	tx, err = db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	held, err := e.InsertTx(ctx, tx, note{Text: "c"}, opts)
	if err != nil || held != first {
		t.Fatalf("insert of a committed key: %d, %v; want the holder %d", held, err, first)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// Two open transactions insert the same new key: the second waits for
	// the first and, once it committed, is refused as busy.
	a, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	aID, err := e.InsertTx(ctx, a, note{Text: "a"}, &taskd.InsertOpts{Key: "order-8"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	bErr := make(chan error, 1)
	go func() {
		_, err := e.InsertTx(ctx, b, note{Text: "b"}, &taskd.InsertOpts{Key: "order-8"})
		bErr <- err
	}()
	time.Sleep(100 * time.Millisecond) // b waits on a's key
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-bErr; !errors.Is(err, tasks.ErrBusy) || !strings.Contains(err.Error(), "roll the transaction back") {
		t.Fatalf("insert of a key another transaction committed meanwhile: %v, want ErrBusy saying to retry", err)
	}
	_ = b.Rollback()
	b, err = db.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if id, err := e.InsertTx(ctx, b, note{Text: "b"}, &taskd.InsertOpts{Key: "order-8"}); err != nil || id != aID {
		t.Fatalf("the retried transaction's insert: %d, %v; want the holder %d", id, err, aID)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	st, err := e.PoolStats(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if n := st.ByStatus[tasks.StatusPending]; n != 2 {
		t.Errorf("%d tasks pending, want 2 (one per key)", n)
	}
}

// TestInsertTxInvalid: bad args are refused with ErrInvalid and write
// nothing in the transaction, which stays usable.
func TestInsertTxInvalid(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEngine(t, taskd.Config{})
	tx, err := e.DBForTest().BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	for _, tc := range []struct {
		name string
		ps   []taskd.InsertParams
		want string
	}{
		{"no args", []taskd.InsertParams{{}}, "no args"},
		{"not JSON", []taskd.InsertParams{{Args: badArgs{C: make(chan int)}}}, "encode taskd_test.badArgs"},
		{"one bad of two", []taskd.InsertParams{{Args: note{Text: "ok"}}, {Args: note{}, Opts: &taskd.InsertOpts{Title: strings.Repeat("t", 513)}}}, "task 2 of 2"},
	} {
		ids, err := e.InsertManyTx(ctx, tx, tc.ps)
		if !errors.Is(err, taskd.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || ids != nil {
			t.Errorf("%s: ids %v, error %v; want ErrInvalid mentioning %q", tc.name, ids, err, tc.want)
		}
	}
	if _, err := e.InsertTx(ctx, nil, note{}, nil); !errors.Is(err, taskd.ErrInvalid) {
		t.Errorf("no transaction: %v, want ErrInvalid", err)
	}
	var n int
	if err := tx.GetContext(ctx, &n, "SELECT COUNT(*) FROM tasks"); err != nil || n != 0 {
		t.Fatalf("%d tasks in the transaction after the refused inserts (%v), want 0", n, err)
	}
	if _, err := e.InsertTx(ctx, tx, note{Text: "fine"}, nil); err != nil {
		t.Fatalf("the transaction after refused inserts: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := e.DBForTest().GetContext(ctx, &n, "SELECT COUNT(*) FROM tasks"); err != nil || n != 1 {
		t.Fatalf("%d tasks committed (%v), want the valid one", n, err)
	}
}

// TestInsertTxSessionTimeZone: a caller's session in another time zone gets
// UTC times in its tasks, and its own zone back.
func TestInsertTxSessionTimeZone(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEngine(t, taskd.Config{})
	conn, err := e.DBForTest().Connx(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	defer conn.ExecContext(context.WithoutCancel(ctx), "SET time_zone = '+00:00'")
	if _, err := conn.ExecContext(ctx, "SET time_zone = '+05:00'"); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	now, err := e.InsertTx(ctx, tx, note{Text: "now"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	after, err := e.InsertTx(ctx, tx, note{Text: "later"}, &taskd.InsertOpts{RunAfter: later})
	if err != nil {
		t.Fatal(err)
	}
	var zone string
	if err := tx.GetContext(ctx, &zone, "SELECT @@SESSION.time_zone"); err != nil || zone != "+05:00" {
		t.Errorf("the session's time zone after InsertTx: %q (%v), want +05:00 back", zone, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	task, err := e.Task(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(task.CreatedAt); d < -time.Minute || d > time.Minute {
		t.Errorf("created_at %v is %v from now, want UTC", task.CreatedAt, d)
	}
	if d := time.Since(task.RunAfter); d < -time.Minute || d > time.Minute {
		t.Errorf("run_after %v is %v from now, want UTC", task.RunAfter, d)
	}
	if task, err = e.Task(ctx, after); err != nil || !task.RunAfter.Equal(later) {
		t.Errorf("run_after %v (%v), want %v", task.RunAfter, err, later)
	}
}

// TestInsertTxWaitersBounded: open transactions are watched by at most
// Dispatch.InsertTxWaiters connections, the rest queued; Stop ends the
// waiters at once, giving their connections up, while the transactions are
// still open; those then commit without a wake-up, and the poll finds them.
func TestInsertTxWaitersBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := taskd.Config{}
	cfg.Dispatch.InsertTxWaiters = 2
	e := newEngine(t, cfg)
	db := e.DBForTest()
	var txs []*sqlx.Tx
	for i := range 5 {
		tx, err := db.BeginTxx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		txs = append(txs, tx)
		if _, err := e.InsertTx(ctx, tx, note{Text: fmt.Sprint(i)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, 10*time.Second, "2 waiters on the 5 open transactions", func() bool {
		queued, running := e.CommitWaitersForTest()
		return running == 2 && queued >= 3
	})
	// Some waits of a second each go by: still 2.
	time.Sleep(1500 * time.Millisecond)
	if queued, running := e.CommitWaitersForTest(); running != 2 || queued < 3 {
		t.Fatalf("%d waiters, %d queued; want 2 and at least 3", running, queued)
	}
	if n := db.Stats().InUse; n != 5+2 {
		t.Errorf("%d connections in use, want the 5 transactions' and the 2 waiters'", n)
	}
	stopped := time.Now()
	if err := e.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(stopped); d > 2*time.Second {
		t.Errorf("Stop took %v with waiters waiting, want them cut off at once", d)
	}
	if queued, running := e.CommitWaitersForTest(); running != 0 {
		t.Errorf("%d waiters (%d queued) after Stop, want none", running, queued)
	}
	if n := db.Stats().InUse; n != 5 {
		t.Errorf("%d connections in use after Stop, want the 5 transactions' only", n)
	}
	for _, tx := range txs {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := db.GetContext(ctx, &n, "SELECT COUNT(*) FROM tasks"); err != nil || n != 5 {
		t.Fatalf("%d tasks after the commits (%v), want 5", n, err)
	}
}
