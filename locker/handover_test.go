package locker_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
)

// handover checks one ReleaseFirst obtain on keys of rdb: the holder's own
// lock on "old" is released, another's lock on "theirs" is not, and the first
// free candidate is obtained.
func handover(t *testing.T, lc *locker.Client, rdbs []redis.UniversalClient, old, theirs string, cands []string) {
	t.Helper()
	ctx := context.Background()
	for _, rdb := range rdbs {
		rdb.Set(ctx, old, "ed:1", time.Minute)
		rdb.Set(ctx, theirs, "ed:2", time.Minute)
		rdb.Set(ctx, cands[0], "ed:3", time.Minute)
	}
	lock, err := lc.ObtainAny(ctx, cands, time.Minute, &locker.Options{Token: "ed:1", ReleaseFirst: []string{old, theirs}})
	if err != nil {
		t.Fatalf("obtain any with release first: %v", err)
	}
	if lock.Key() != cands[1] {
		t.Fatalf("obtained %q, want the first free candidate %q", lock.Key(), cands[1])
	}
	for i, rdb := range rdbs {
		if n := rdb.Exists(ctx, old).Val(); n != 0 {
			t.Errorf("node %d: the holder's own lock %q is still there", i, old)
		}
		if v := rdb.Get(ctx, theirs).Val(); v != "ed:2" {
			t.Errorf("node %d: another holder's lock %q = %q, want it kept", i, theirs, v)
		}
		if v := rdb.Get(ctx, cands[1]).Val(); v != "ed:1" {
			t.Errorf("node %d: obtained key %q = %q, want ed:1", i, cands[1], v)
		}
	}
	// Released even when nothing is obtained.
	for _, rdb := range rdbs {
		rdb.Set(ctx, old, "ed:1", time.Minute)
	}
	if _, err := lc.ObtainAny(ctx, cands[:1], time.Minute, &locker.Options{Token: "ed:1", ReleaseFirst: []string{old}}); err != locker.ErrNotObtained {
		t.Fatalf("obtain of a held key: %v, want ErrNotObtained", err)
	}
	for i, rdb := range rdbs {
		if n := rdb.Exists(ctx, old).Val(); n != 0 {
			t.Errorf("node %d: %q not released when no candidate was free", i, old)
		}
	}
}

// On a single server, a handover is one round trip.
func TestObtainAnyReleaseFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	calls := &counter{}
	lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls})
	p := testenv.Prefix(t)
	// Load the script, so that what is counted is the steady state.
	if _, err := lc.ObtainAny(ctx, []string{p + "warm"}, time.Minute, &locker.Options{Token: "w", ReleaseFirst: []string{p + "x"}}); err != nil {
		t.Fatal(err)
	}
	calls.n.Store(0)
	handover(t, lc, []redis.UniversalClient{rdb}, p+"old", p+"theirs", []string{p + "c1", p + "c2", p + "c3"})
	if n := calls.n.Load(); n != 2 {
		t.Errorf("%d calls to Redis for two handovers, want 2: one round trip each", n)
	}
	if _, err := lc.ObtainAny(ctx, []string{p + "c9"}, time.Minute, &locker.Options{ReleaseFirst: []string{p + "old"}}); err == nil {
		t.Errorf("ReleaseFirst without a Token: no error")
	}
}

// On a Cluster, keys of the candidates' slot are released in the same script,
// others in a call of their own; the outcome is the same.
func TestObtainAnyReleaseFirstCluster(t *testing.T) {
	t.Parallel()
	cc := testenv.Cluster(t)
	lc := locker.New(cc)
	p := testenv.Prefix(t)
	t.Run("same slot", func(t *testing.T) {
		handover(t, lc, []redis.UniversalClient{cc}, p+"{t}old", p+"{t}theirs", []string{p + "{t}c1", p + "{t}c2"})
	})
	t.Run("other slots", func(t *testing.T) {
		handover(t, lc, []redis.UniversalClient{cc}, p+"{a}old", p+"{b}theirs", []string{p + "{c}c1", p + "{c}c2"})
	})
}

// With Redlock, every master releases and obtains.
func TestObtainAnyReleaseFirstRedlock(t *testing.T) {
	t.Parallel()
	_, clients, lc := masters(t, 3)
	rdbs := make([]redis.UniversalClient, len(clients))
	for i, c := range clients {
		rdbs[i] = c
	}
	p := testenv.Prefix(t)
	handover(t, lc, rdbs, p+"old", p+"theirs", []string{p + "c1", p + "c2"})
}
