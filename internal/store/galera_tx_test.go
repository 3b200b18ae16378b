package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/tasks"
)

// galeraStores opens a store on each node of a Galera test database.
func galeraStores(t *testing.T, g *storetest.Galera) []*store.Store {
	t.Helper()
	var ss []*store.Store
	for _, db := range g.Nodes {
		s, err := store.New(db, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		askGalera(t, s)
		ss = append(ss, s)
	}
	return ss
}

// TestGaleraInsertTxAcrossNodes: tasks inserted in a caller's transaction on
// one node are seen by no node before the COMMIT, are claimable on another
// node after it, and leave nothing on any node when rolled back.
func TestGaleraInsertTxAcrossNodes(t *testing.T) {
	g := storetest.NewGalera(t)
	ss := galeraStores(t, g)
	ctx := context.Background()
	countTitle := func(node int, title string) int {
		t.Helper()
		var n int
		if err := g.Nodes[node].GetContext(ctx, &n, "SELECT COUNT(*) FROM tasks WHERE title = ?", title); err != nil {
			t.Fatal(err)
		}
		return n
	}

	tx, err := g.Nodes[0].BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ins, err := ss[0].InsertIn(ctx, tx, []tasks.NewTask{{Category: "news", Title: "committed"}, {Category: "news", Title: "committed"}})
	if err != nil {
		_ = tx.Rollback()
		t.Fatalf("insert in a transaction: %v", err)
	}
	for node := range g.Nodes {
		if n := countTitle(node, "committed"); n != 0 {
			t.Errorf("node %d sees %d tasks of an open transaction", node+1, n)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	// Claimable through the second node at once: its reads are causal.
	var ps []tasks.ClaimParams
	for _, in := range ins {
		task, err := ss[1].GetTask(ctx, in.ID)
		if err != nil {
			t.Fatalf("task %d on node 2: %v", in.ID, err)
		}
		ps = append(ps, tasks.ClaimParams{TaskID: in.ID, Fence: task.Fence, Status: task.Status, Holder: "worker:b:0", Lease: time.Minute})
	}
	res, err := ss[1].ClaimBatch(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Claim == nil || r.Claim.Task.ID != ins[i].ID {
			t.Errorf("claim of task %d on node 2: %+v, %v", ins[i].ID, r.Claim, r.Err)
		}
	}

	// Rolled back: nothing on any node, and nothing to claim.
	tx, err = g.Nodes[0].BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ins, err = ss[0].InsertIn(ctx, tx, []tasks.NewTask{{Category: "news", Title: "rolled back"}})
	if err != nil {
		_ = tx.Rollback()
		t.Fatalf("insert in a transaction: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	for node := range g.Nodes {
		if n := countTitle(node, "rolled back"); n != 0 {
			t.Errorf("node %d has %d rolled-back tasks", node+1, n)
		}
		if _, err := ss[node].GetTask(ctx, ins[0].ID); !errors.Is(err, tasks.ErrNotFound) {
			t.Errorf("node %d: the rolled-back task: %v, want ErrNotFound", node+1, err)
		}
	}
	cands, err := ss[2].Candidates(ctx, tasks.CandidatesParams{Categories: []string{"news"}, Limit: 10})
	if err != nil || len(cands) != 0 {
		t.Errorf("candidates on node 3 = %+v, %v; want none", cands, err)
	}
}

// TestGaleraCompleteTxTakenOverOnAnotherNode: a handler's transaction on one
// node completes its claim with CompleteTx while another node takes the claim
// over. Row locks are each node's own, so the takeover is not held off by
// the lock CompleteTx took: which side wins is decided by certification, and
// the handler's effects never commit with a stale fence.
//   - Taken over before CompleteTx: CompleteTx's read is causal and sees the
//     takeover; it refuses with ErrStale (the fence check), writing nothing.
//   - Taken over after CompleteTx, before the COMMIT: the takeover commits
//     first, and the handler's COMMIT fails certification (a deadlock, 1213):
//     its effects and the outcome are rolled back together.
func TestGaleraCompleteTxTakenOverOnAnotherNode(t *testing.T) {
	g := storetest.NewGalera(t)
	ss := galeraStores(t, g)
	ctx := context.Background()
	g.Nodes[0].MustExecContext(ctx, "CREATE TABLE effects (task_id BIGINT UNSIGNED NOT NULL, fence BIGINT UNSIGNED NOT NULL, PRIMARY KEY (task_id, fence))")
	ids, err := ss[0].InsertTasks(ctx, []tasks.NewTask{{Category: "jobs", Title: "before"}, {Category: "jobs", Title: "after"}})
	if err != nil {
		t.Fatal(err)
	}
	const lease = 1500 * time.Millisecond
	claim := func(s *store.Store, id int64, holder string) *tasks.Claim {
		t.Helper()
		task, err := s.GetTask(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.ClaimBatch(ctx, []tasks.ClaimParams{{TaskID: id, Fence: task.Fence, Status: task.Status, Holder: holder, Lease: lease}})
		if err != nil || res[0].Err != nil {
			t.Fatalf("claim task %d for %s: %v %+v", id, holder, err, res)
		}
		return res[0].Claim
	}
	// takeOver waits for the claim's lease to pass and takes the claim over
	// on node 2.
	takeOver := func(c *tasks.Claim) *tasks.Claim {
		t.Helper()
		time.Sleep(time.Until(c.LeaseExpiresAt) + 100*time.Millisecond)
		cur, err := ss[1].Claim(ctx, tasks.ClaimParams{TaskID: c.Task.ID, Fence: c.Fence, Status: tasks.StatusAssigned, Holder: "worker:b:0", Lease: time.Minute})
		if err != nil {
			t.Fatalf("take task %d over on node 2: %v", c.Task.ID, err)
		}
		return cur
	}
	outcome := func(c *tasks.Claim) tasks.Outcome {
		return tasks.Outcome{TaskID: c.Task.ID, Fence: c.Fence, Holder: c.Task.Holder, Result: json.RawMessage(`{"n":1}`)}
	}
	// effectsOf counts the handler's rows of the task, read on node 3.
	effectsOf := func(id int64) int {
		t.Helper()
		var n int
		if err := g.Nodes[2].GetContext(ctx, &n, "SELECT COUNT(*) FROM effects WHERE task_id = ?", id); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// wantTakenOver checks on node 3 that the task is the new claim's, with
	// no result of the stale one.
	wantTakenOver := func(stale, cur *tasks.Claim) {
		t.Helper()
		task, err := ss[2].GetTask(ctx, cur.Task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status != tasks.StatusAssigned || task.Fence != cur.Fence || task.Holder != cur.Task.Holder {
			t.Errorf("task %d: %s at fence %d of %s, want the takeover's claim (fence %d of %s)",
				task.ID, task.Status, task.Fence, task.Holder, cur.Fence, cur.Task.Holder)
		}
		var n int
		if err := g.Nodes[2].GetContext(ctx, &n, "SELECT COUNT(*) FROM task_results WHERE task_id = ?", cur.Task.ID); err != nil || n != 0 {
			t.Errorf("task %d: %d results (%v), want none", cur.Task.ID, n, err)
		}
		if n := effectsOf(cur.Task.ID); n != 0 {
			t.Errorf("task %d: %d effects of the stale handler committed, want none", cur.Task.ID, n)
		}
	}

	// Taken over before CompleteTx: the fence check refuses.
	stale := claim(ss[0], ids[0], "worker:a:0")
	cur := takeOver(stale)
	tx, err := g.Nodes[0].BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx.MustExecContext(ctx, "INSERT INTO effects (task_id, fence) VALUES (?, ?)", stale.Task.ID, stale.Fence)
	if _, err := ss[0].CompleteTx(ctx, tx, outcome(stale)); !errors.Is(err, tasks.ErrStale) {
		t.Errorf("CompleteTx of a claim taken over on node 2: %v, want ErrStale", err)
	}
	_ = tx.Rollback()
	wantTakenOver(stale, cur)

	// Taken over between CompleteTx and the COMMIT: certification refuses.
	stale = claim(ss[0], ids[1], "worker:a:0")
	tx, err = g.Nodes[0].BeginTxx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx.MustExecContext(ctx, "INSERT INTO effects (task_id, fence) VALUES (?, ?)", stale.Task.ID, stale.Fence)
	if _, err := ss[0].CompleteTx(ctx, tx, outcome(stale)); err != nil {
		_ = tx.Rollback()
		t.Fatalf("CompleteTx of a live claim: %v", err)
	}
	cur = takeOver(stale)
	err = tx.Commit()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1213 {
		t.Errorf("the stale handler's COMMIT: %v, want a certification failure (1213)", err)
	}
	t.Logf("the stale handler's COMMIT after a takeover on another node: %v", err)
	wantTakenOver(stale, cur)
}
