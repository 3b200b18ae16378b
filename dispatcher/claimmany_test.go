package dispatcher_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/roundtrip"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// A worker's batch of claims is one round trip to Redis and one to MySQL
// (one commit), whatever its size, and never more claims than holders.
func TestClaimManyRoundTrips(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, sqlCount, err := roundtrip.OpenMySQL(ctx, storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rdb := testenv.Redis(t)
	redisCount := &roundtrip.RedisHook{}
	rdb.AddHook(redisCount)
	b := setup(t, setupOpts{Redis: rdb, DB: db})
	b.Add(t, "news", 0, 20)
	holders := func(from, n int) []string {
		hs := make([]string, n)
		for i := range hs {
			hs[i] = fmt.Sprintf("worker:w:%d", from+i)
		}
		return hs
	}
	// Warm up: the scripts are loaded, the connections open.
	if _, err := b.D.NextMany(ctx, holders(0, 1), []string{"news"}, 0); err != nil {
		t.Fatal(err)
	}
	// One candidate is locked by another process: its holder stays free.
	cands, err := b.Store.Candidates(ctx, tasks.CandidatesParams{Categories: []string{"news"}, Limit: 1})
	if err != nil || len(cands) != 1 {
		t.Fatalf("candidates: %v %v", cands, err)
	}
	if err := rdb.Set(ctx, b.LockKey(cands[0].ID), "someone-else", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}

	sql0, redis0, reads0 := sqlCount.Counts(), redisCount.RoundTrips(), b.D.Stats().CandidateReads
	hs := holders(1, 8)
	claims, err := b.D.NextMany(ctx, hs, []string{"news"}, 0)
	if err != nil {
		t.Fatalf("claim many: %v", err)
	}
	sql := sqlCount.Counts().Sub(sql0)
	reads := b.D.Stats().CandidateReads - reads0
	if sql.RoundTrips-reads != 1 || sql.Commits != 1 {
		t.Errorf("MySQL: %d round trips (%d candidate reads apart) and %d commits for a batch of %d claims, want 1 and 1",
			sql.RoundTrips-reads, reads, sql.Commits, len(claims))
	}
	// The release of the lock another holds is none: nothing to give back.
	if n := redisCount.RoundTrips() - redis0; n != 1 {
		t.Errorf("%d Redis round trips for a batch of %d claims, want 1", n, len(claims))
	}
	if len(claims) != 7 {
		t.Fatalf("%d claims for 8 holders with one candidate locked elsewhere, want 7 (the batch skips it)", len(claims))
	}
	seen := make(map[string]bool)
	for _, c := range claims {
		if seen[c.Task.Holder] || !slices.Contains(hs, c.Task.Holder) {
			t.Fatalf("claim for holder %q: each holder gets one claim at most", c.Task.Holder)
		}
		seen[c.Task.Holder] = true
		if c.Task.ID == cands[0].ID {
			t.Fatalf("claimed task %d, whose lock another process holds", c.Task.ID)
		}
		if got := b.Task(t, c.Task.ID); got.Status != tasks.StatusAssigned || got.Holder != c.Task.Holder || got.Fence != c.Fence {
			t.Fatalf("task %d = %+v, want assigned to %s at fence %d", c.Task.ID, got, c.Task.Holder, c.Fence)
		}
		if v := rdb.Get(ctx, b.LockKey(c.Task.ID)).Val(); v != c.Task.Holder {
			t.Fatalf("task %d's lock = %q, want its holder %q", c.Task.ID, v, c.Task.Holder)
		}
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE status = 'assigned'"); n != 8 {
		t.Fatalf("%d tasks assigned, want 8 (1 warm-up claim, 7 in the batch)", n)
	}
}

// A batch wider than one candidate read of the pool (Config.Batch) is still
// one candidate read and one round trip per store: 150 free slots get 150
// claims, not Batch of them.
func TestClaimManyWiderThanTheCandidateBatch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, sqlCount, err := roundtrip.OpenMySQL(ctx, storetest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	rdb := testenv.Redis(t)
	redisCount := &roundtrip.RedisHook{}
	rdb.AddHook(redisCount)
	b := setup(t, setupOpts{Redis: rdb, DB: db})
	b.Add(t, "news", 0, 200)
	if b.D.Config().Batch >= 150 {
		t.Fatalf("the pool's batch is %d: the test wants a batch of claims wider than it", b.D.Config().Batch)
	}
	hs := make([]string, 150)
	for i := range hs {
		hs[i] = fmt.Sprintf("worker:w:%d", i)
	}
	// A first claim in another category loads the lock scripts into Redis,
	// so that the counted claim's EVALSHA finds them (a fresh server's
	// first answers NOSCRIPT, and go-redis sends the script again).
	b.Add(t, "warm", 0, 1)
	if warm, err := b.D.NextMany(ctx, []string{"worker:warm"}, []string{"warm"}, 0); err != nil || len(warm) != 1 {
		t.Fatalf("warm-up claim: %d claims, %v", len(warm), err)
	}
	sql0, redis0 := sqlCount.Counts(), redisCount.RoundTrips()
	claims, err := b.D.NextMany(ctx, hs, []string{"news"}, 0)
	if err != nil {
		t.Fatalf("claim many: %v", err)
	}
	if len(claims) != len(hs) {
		t.Fatalf("%d claims for %d free holders and 200 pending tasks, want %d", len(claims), len(hs), len(hs))
	}
	sql := sqlCount.Counts().Sub(sql0)
	if sql.RoundTrips != 2 || sql.Commits != 1 {
		t.Errorf("MySQL: %d round trips and %d commits, want 2 (one candidate read, one batch) and 1", sql.RoundTrips, sql.Commits)
	}
	if n := redisCount.RoundTrips() - redis0; n != 1 {
		t.Errorf("%d Redis round trips, want 1", n)
	}
	ids := make(map[int64]bool)
	for _, c := range claims {
		if ids[c.Task.ID] {
			t.Fatalf("task %d claimed twice", c.Task.ID)
		}
		ids[c.Task.ID] = true
	}
	if n := b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE status = 'assigned' AND category = 'news'"); n != len(hs) {
		t.Fatalf("%d tasks assigned, want %d", n, len(hs))
	}
}
