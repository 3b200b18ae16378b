package locker_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
)

// roundTrips counts what a client sends: each command and each pipeline is
// one round trip (a Cluster pipeline goes to its masters in parallel).
type roundTrips struct{ n atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.n.Add(1)
		return next(ctx, cmds)
	}
}

// slotKeys returns n keys under prefix that all fall in different hash
// slots.
func slotKeys(prefix string, n int) []string {
	seen := make(map[int]bool)
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("%stask:%d", prefix, i)
		if s := locker.Slot(k); !seen[s] {
			seen[s] = true
			keys = append(keys, k)
		}
	}
	return keys
}

func TestClusterAcrossSlots(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cc := testenv.Cluster(t)
	lc := locker.New(cc)
	keys := slotKeys(testenv.Prefix(t), 96)

	// The keys must land on every master, or this proves little.
	masters := make(map[string]bool)
	for _, k := range keys {
		shard, err := cc.MasterForKey(ctx, k)
		if err != nil {
			t.Fatalf("master for %q: %v", k, err)
		}
		masters[shard.Options().Addr] = true
	}
	if len(masters) != 3 {
		t.Fatalf("keys cover %d masters, want 3", len(masters))
	}

	for _, k := range keys {
		lock, err := lc.Obtain(ctx, k, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain %q: %v", k, err)
		}
		if _, err := lc.Obtain(ctx, k, time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("obtain %q twice: err = %v, want ErrNotObtained", k, err)
		}
		if err := lock.Refresh(ctx, time.Hour, nil); err != nil {
			t.Fatalf("refresh %q: %v", k, err)
		}
		if ttl, err := lock.TTL(ctx); err != nil || ttl <= 59*time.Minute {
			t.Fatalf("ttl %q = %v, %v; want about 1h", k, ttl, err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release %q: %v", k, err)
		}
		if err := lock.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("release %q twice: err = %v, want ErrNotHeld", k, err)
		}
	}
}

func TestClusterObtainAny(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cc := testenv.Cluster(t)
	rt := &roundTrips{}
	cc.AddHook(rt)
	lc := locker.New(cc)
	keys := slotKeys(testenv.Prefix(t), 24)

	// Warm the script cache of every master, so that the counts below are
	// the steady state.
	if _, err := lc.ObtainAny(ctx, slotKeys(testenv.Prefix(t), 24), time.Second, nil); err != nil {
		t.Fatalf("warm-up: %v", err)
	}

	t.Run("all free", func(t *testing.T) {
		rt.n.Store(0)
		lock, err := lc.ObtainAny(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain any: %v", err)
		}
		if lock.Key() != keys[0] {
			t.Fatalf("obtained %q, want the first key %q", lock.Key(), keys[0])
		}
		// Every slot's script took its key; all but the first were given
		// back in the second round trip.
		if n := rt.n.Load(); n != 2 {
			t.Fatalf("%d round trips, want 2", n)
		}
		for _, k := range keys[1:] {
			if n := cc.Exists(ctx, k).Val(); n != 0 {
				t.Fatalf("stray lock left on %q", k)
			}
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
	})

	t.Run("first ones taken", func(t *testing.T) {
		for _, k := range keys[:5] {
			cc.Set(ctx, k, "other", time.Minute)
		}
		rt.n.Store(0)
		lock, err := lc.ObtainAny(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain any: %v", err)
		}
		if lock.Key() != keys[5] {
			t.Fatalf("obtained %q, want the first free key %q", lock.Key(), keys[5])
		}
		if n := rt.n.Load(); n > 2 {
			t.Fatalf("%d round trips, want at most 2", n)
		}
		for i, k := range keys {
			got := cc.Get(ctx, k).Val()
			switch {
			case i < 5 && got != "other":
				t.Fatalf("%q: another holder's lock became %q", k, got)
			case i > 5 && got != "":
				t.Fatalf("%q: stray lock %q", k, got)
			}
		}
		_ = lock.Release(ctx)
	})

	t.Run("all taken", func(t *testing.T) {
		for _, k := range keys {
			cc.Set(ctx, k, "other", time.Minute)
		}
		if _, err := lc.ObtainAny(ctx, keys, time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("err = %v, want ErrNotObtained", err)
		}
		for _, k := range keys {
			if got := cc.Get(ctx, k).Val(); got != "other" {
				t.Fatalf("%q: another holder's lock became %q", k, got)
			}
		}
	})
}

// TestClusterRedlock runs Redlock with the Cluster as one master and two
// single servers as the others: the same API over mixed nodes.
func TestClusterRedlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cc := testenv.Cluster(t)
	a, b := testenv.StartRedis(t).Client(), testenv.StartRedis(t).Client()
	// A generous node timeout: this test is about mixed nodes, not time,
	// and a loaded machine can take longer than the 50ms default.
	lc, err := locker.NewRedlock([]locker.RedisClient{cc, a, b}, &locker.RedlockOptions{NodeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("new redlock: %v", err)
	}
	keys := slotKeys(testenv.Prefix(t), 8)
	cc.Set(ctx, keys[0], "other", time.Minute)
	lock, err := lc.ObtainAny(ctx, keys, time.Minute, nil)
	if err != nil {
		t.Fatalf("obtain any: %v", err)
	}
	if lock.Key() != keys[0] {
		t.Fatalf("obtained %q, want %q (free on 2 of 3 masters)", lock.Key(), keys[0])
	}
	for _, k := range keys[1:] {
		if cc.Exists(ctx, k).Val()+a.Exists(ctx, k).Val()+b.Exists(ctx, k).Val() != 0 {
			t.Fatalf("stray lock left on %q", k)
		}
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}
