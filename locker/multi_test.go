package locker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
)

// tagged returns n keys that share the hash tag of prefix, so one slot.
func tagged(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("{%s}:%c", prefix, 'a'+i)
	}
	return keys
}

// values returns what rdb holds at each of keys ("" when missing).
func values(t *testing.T, rdb redis.Cmdable, keys []string) []string {
	t.Helper()
	out := make([]string, len(keys))
	for i, k := range keys {
		v, err := rdb.Get(context.Background(), k).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			t.Fatalf("get %q: %v", k, err)
		}
		out[i] = v
	}
	return out
}

func TestObtainMulti(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)

	t.Run("all or nothing", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		calls := &counter{}
		lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls})
		p := testenv.Prefix(t)
		keys := []string{p + "a", p + "b", p + "c"}

		// Load the script into the server's cache, so that what is counted
		// below is the steady state.
		warm, err := lc.ObtainMulti(ctx, []string{p + "warm", p + "up"}, time.Minute, nil)
		if err != nil {
			t.Fatalf("warm-up: %v", err)
		}
		_ = warm.Release(ctx)

		// One key held by someone else: nothing is set.
		rdb.Set(ctx, keys[1], "other", time.Minute)
		calls.n.Store(0)
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if !errors.Is(err, locker.ErrNotObtained) || lock != nil {
			t.Fatalf("obtain multi with one key held: %v, %v; want nil, ErrNotObtained", lock, err)
		}
		if n := calls.n.Load(); n != 1 {
			t.Fatalf("failed obtain multi took %d round trips, want 1", n)
		}
		if got := values(t, rdb, keys); !slices.Equal(got, []string{"", "other", ""}) {
			t.Fatalf("after a failed obtain multi redis holds %q, want only the other holder's key", got)
		}

		// All free: every key, one token, one round trip.
		rdb.Del(ctx, keys[1])
		calls.n.Store(0)
		start := time.Now()
		lock, err = lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		if n := calls.n.Load(); n != 1 {
			t.Fatalf("obtain multi took %d round trips, want 1", n)
		}
		if got := values(t, rdb, keys); count(got, lock.Token()) != 3 {
			t.Fatalf("redis holds %q, want our token at every key", got)
		}
		if !slices.Equal(lock.Keys(), keys) || lock.Key() != keys[0] {
			t.Fatalf("keys = %q, key = %q; want %q", lock.Keys(), lock.Key(), keys)
		}
		if v := lock.Validity(); !setSince(v, time.Minute-redlockDrift(time.Minute), start) {
			t.Fatalf("validity = %v, want just under 1m (ttl minus elapsed minus drift)", v)
		}

		// Any overlap with a held multi-key lock is refused.
		if _, err := lc.ObtainMulti(ctx, []string{p + "x", keys[2]}, time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("overlapping obtain multi: err = %v, want ErrNotObtained", err)
		}
		if _, err := lc.Obtain(ctx, keys[2], time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("obtain of one of its keys: err = %v, want ErrNotObtained", err)
		}
		if n := rdb.Exists(ctx, p+"x").Val(); n != 0 {
			t.Fatalf("the refused obtain multi set %q", p+"x")
		}

		// Refresh, TTL and Release act on every key.
		expireAt := time.Now()
		rdb.PExpire(ctx, keys[2], 30*time.Second) // the least ttl is the lock's
		if ttl, err := lock.TTL(ctx); err != nil || !setSince(ttl, 30*time.Second, expireAt) {
			t.Fatalf("ttl = %v, %v; want the least of its keys', about 30s", ttl, err)
		}
		if err := lock.Refresh(ctx, time.Hour, nil); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		for _, k := range keys {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 59*time.Minute {
				t.Fatalf("pttl of %q after refresh = %v, want about 1h", k, ttl)
			}
		}
		if ttl, err := lock.TTL(ctx); err != nil || ttl <= 59*time.Minute {
			t.Fatalf("ttl after refresh = %v, %v; want about 1h", ttl, err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		if n := rdb.Exists(ctx, keys...).Val(); n != 0 {
			t.Fatalf("%d keys left after release", n)
		}
		if err := lock.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("second release: err = %v, want ErrNotHeld", err)
		}
	})

	t.Run("one key lost", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		lc := locker.New(rdb)
		p := testenv.Prefix(t)
		keys := []string{p + "a", p + "b", p + "c"}
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		rdb.Set(ctx, keys[1], "thief", time.Minute)

		if err := lock.Refresh(ctx, time.Hour, nil); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("refresh: err = %v, want ErrNotHeld", err)
		}
		for _, k := range keys {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl > time.Minute {
				t.Fatalf("a failed refresh extended %q to %v", k, ttl)
			}
		}
		if ttl, err := lock.TTL(ctx); ttl != 0 || err != nil {
			t.Fatalf("ttl = %v, %v; want 0, nil", ttl, err)
		}
		if err := lock.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("release: err = %v, want ErrNotHeld", err)
		}
		// Our keys are gone all the same; the thief's stays.
		if got := values(t, rdb, keys); !slices.Equal(got, []string{"", "thief", ""}) {
			t.Fatalf("after release redis holds %q, want only the thief's key", got)
		}
	})

	t.Run("reentrant", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		lc := locker.New(rdb)
		p := testenv.Prefix(t)
		keys := []string{p + "a", p + "b"}
		// The caller already holds one key under its token.
		if _, err := lc.Obtain(ctx, keys[0], time.Second, &locker.Options{Token: "job-1"}); err != nil {
			t.Fatalf("obtain: %v", err)
		}
		if _, err := lc.ObtainMulti(ctx, keys, time.Minute, &locker.Options{Token: "job-2"}); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("obtain multi under another token: err = %v, want ErrNotObtained", err)
		}
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, &locker.Options{Token: "job-1"})
		if err != nil {
			t.Fatalf("obtain multi under the same token: %v", err)
		}
		for _, k := range keys {
			if ttl := rdb.PTTL(ctx, k).Val(); ttl <= 50*time.Second {
				t.Fatalf("pttl of %q = %v: the new ttl was not set", k, ttl)
			}
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
	})

	t.Run("retries until free", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		p := testenv.Prefix(t)
		keys := []string{p + "a", p + "b"}
		rdb.Set(ctx, keys[1], "other", time.Minute)
		calls := &counter{}
		lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls, fail: func(n int64) error {
			if n == 3 {
				rdb.Del(ctx, keys[1]) // the other holder lets go before the third attempt
			}
			return nil
		}})
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, &locker.Options{RetryStrategy: locker.LinearBackoff(time.Millisecond)})
		if err != nil {
			t.Fatalf("obtain multi with retries: %v", err)
		}
		if got := values(t, rdb, keys); count(got, lock.Token()) != 2 {
			t.Fatalf("redis holds %q, want our token at every key", got)
		}
	})

	t.Run("release all", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		lc := locker.New(rdb)
		p := testenv.Prefix(t)
		multi, err := lc.ObtainMulti(ctx, []string{p + "a", p + "b", p + "c"}, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		lost, err := lc.ObtainMulti(ctx, []string{p + "d", p + "e"}, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		single, err := lc.Obtain(ctx, p+"f", time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain: %v", err)
		}
		rdb.Del(ctx, p+"e")
		n, err := lc.ReleaseAll(ctx, []*locker.Lock{multi, lost, single})
		if err != nil || n != 2 {
			t.Fatalf("release all = %d, %v; want 2 (the half-lost lock does not count)", n, err)
		}
		if n := rdb.Exists(ctx, p+"a", p+"b", p+"c", p+"d", p+"f").Val(); n != 0 {
			t.Fatalf("%d keys left after release all", n)
		}
	})

	t.Run("invalid", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		lc := locker.New(rdb)
		p := testenv.Prefix(t)
		for name, keys := range map[string][]string{
			"no keys":   nil,
			"empty key": {p + "a", ""},
			"duplicate": {p + "a", p + "b", p + "a"},
		} {
			if _, err := lc.ObtainMulti(ctx, keys, time.Minute, nil); err == nil || errors.Is(err, locker.ErrNotObtained) {
				t.Errorf("%s: err = %v, want a validation error", name, err)
			}
		}
		if _, err := lc.ObtainMulti(ctx, []string{p + "a", p + "b"}, time.Millisecond, nil); err == nil || errors.Is(err, locker.ErrNotObtained) {
			t.Errorf("tiny ttl: err = %v, want a validation error", err)
		}
		if n := rdb.Exists(ctx, p+"a", p+"b").Val(); n != 0 {
			t.Fatalf("invalid calls created keys")
		}
	})
}

func TestClusterObtainMulti(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cc := testenv.Cluster(t)
	rt := &roundTrips{}
	cc.AddHook(rt)
	lc := locker.New(cc)
	p := testenv.Prefix(t)

	t.Run("one slot", func(t *testing.T) {
		keys := tagged(p+"job", 4)
		held := tagged(p+"held", 3)
		cc.Set(ctx, held[2], "other", time.Minute)
		if _, err := lc.ObtainMulti(ctx, held, time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("obtain multi with one key held: err = %v, want ErrNotObtained", err)
		}
		if got := values(t, cc, held); !slices.Equal(got, []string{"", "", "other"}) {
			t.Fatalf("after a failed obtain multi the cluster holds %q", got)
		}

		rt.n.Store(0)
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		if n := rt.n.Load(); n > 2 { // 2 when the master's script cache was cold
			t.Fatalf("obtain multi took %d round trips, want 1", n)
		}
		if got := values(t, cc, keys); count(got, lock.Token()) != len(keys) {
			t.Fatalf("cluster holds %q, want our token at every key", got)
		}
		if err := lock.Refresh(ctx, time.Hour, nil); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if ttl, err := lock.TTL(ctx); err != nil || ttl <= 59*time.Minute {
			t.Fatalf("ttl = %v, %v; want about 1h", ttl, err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		if got := values(t, cc, keys); count(got, "") != len(keys) {
			t.Fatalf("cluster holds %q after release", got)
		}
	})

	t.Run("across slots", func(t *testing.T) {
		keys := slotKeys(p+"cross", 3)
		rt.n.Store(0)
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err == nil || lock != nil || errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("obtain multi across slots: %v, %v; want a hash slot error", lock, err)
		}
		for _, want := range []string{keys[0], keys[1], "hash slot", "{"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
		if n := rt.n.Load(); n != 0 {
			t.Fatalf("obtain multi across slots sent %d commands, want none", n)
		}
	})
}

func TestRedlockObtainMulti(t *testing.T) {
	t.Parallel()
	const n, quorum = 3, 2
	t.Run("all up", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		_, clients, lc := masters(t, n)
		keys := tagged(testenv.Prefix(t), 3)
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		for i, c := range clients {
			if got := values(t, c, keys); count(got, lock.Token()) != len(keys) {
				t.Fatalf("master %d holds %q, want our token at every key", i, got)
			}
		}
		if err := lock.Refresh(ctx, time.Hour, nil); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if ttl, err := lock.TTL(ctx); err != nil || ttl <= 59*time.Minute {
			t.Fatalf("ttl = %v, %v; want about 1h", ttl, err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		for i, c := range clients {
			if got := values(t, c, keys); count(got, "") != len(keys) {
				t.Fatalf("master %d holds %q after release", i, got)
			}
		}
	})

	t.Run("master down", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		servers, clients, lc := masters(t, n)
		servers[0].Stop()
		keys := tagged(testenv.Prefix(t), 3)
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi with a master down: %v", err)
		}
		for i, c := range clients[1:] {
			if got := values(t, c, keys); count(got, lock.Token()) != len(keys) {
				t.Fatalf("master %d holds %q, want our token at every key", i+1, got)
			}
		}
		if err := lock.Refresh(ctx, time.Hour, nil); err != nil {
			t.Fatalf("refresh: %v", err)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}

		// A second master down: no quorum, and an outage is not contention.
		servers[1].Stop()
		if _, err := lc.ObtainMulti(ctx, keys, time.Minute, nil); err == nil || errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("obtain multi with a majority down: err = %v, want the masters' errors", err)
		}
		if got := values(t, clients[2], keys); count(got, "") != len(keys) {
			t.Fatalf("the failed obtain multi left %q on the live master", got)
		}
	})

	t.Run("a master counts only with all keys", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		_, clients, lc := masters(t, n)
		keys := tagged(testenv.Prefix(t), 3)
		// Each key is free on a quorum of masters, but only master 2 has
		// all of them free.
		clients[0].Set(ctx, keys[1], "other", time.Minute)
		clients[1].Set(ctx, keys[2], "other", time.Minute)
		if _, err := lc.ObtainMulti(ctx, keys, time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("obtain multi: err = %v, want ErrNotObtained", err)
		}
		want := [][]string{{"", "other", ""}, {"", "", "other"}, {"", "", ""}}
		for i, c := range clients {
			if got := values(t, c, keys); !slices.Equal(got, want[i]) {
				t.Fatalf("master %d holds %q after the failed obtain multi, want %q", i, got, want[i])
			}
		}
	})

	t.Run("key held on a minority", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		_, clients, lc := masters(t, n)
		keys := tagged(testenv.Prefix(t), 3)
		clients[0].Set(ctx, keys[1], "stale", time.Minute)
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		// Master 0 refused the lock as a whole: none of our keys there.
		if got := values(t, clients[0], keys); !slices.Equal(got, []string{"", "stale", ""}) {
			t.Fatalf("master 0 holds %q, want only the stale key", got)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
		if got := values(t, clients[0], keys); got[1] != "stale" {
			t.Fatalf("release deleted another token's key: %q", got)
		}
	})

	t.Run("quorum lost", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		_, clients, lc := masters(t, n)
		keys := tagged(testenv.Prefix(t), 3)
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		// One key lost on a quorum of masters: the lock as a whole is.
		for _, c := range clients[:quorum] {
			c.Del(ctx, keys[2])
		}
		if err := lock.Refresh(ctx, time.Hour, nil); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("refresh: err = %v, want ErrNotHeld", err)
		}
		for i, c := range clients {
			if got := values(t, c, keys); count(got, "") != len(keys) {
				t.Fatalf("master %d holds %q after the failed refresh, want nothing", i, got)
			}
		}
		if ttl, err := lock.TTL(ctx); ttl != 0 || err != nil {
			t.Fatalf("ttl = %v, %v; want 0, nil", ttl, err)
		}
		if err := lock.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("release: err = %v, want ErrNotHeld", err)
		}
	})

	t.Run("cluster master", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		cc := testenv.Cluster(t)
		a, b := testenv.StartRedis(t).Client(), testenv.StartRedis(t).Client()
		lc, err := locker.NewRedlock([]locker.RedisClient{a, cc, b}, &locker.RedlockOptions{NodeTimeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("new redlock: %v", err)
		}
		p := testenv.Prefix(t)
		if _, err := lc.ObtainMulti(ctx, slotKeys(p, 2), time.Minute, nil); err == nil || !strings.Contains(err.Error(), "hash slot") {
			t.Fatalf("obtain multi across slots with a cluster master: err = %v, want a hash slot error", err)
		}
		keys := tagged(p, 3)
		lock, err := lc.ObtainMulti(ctx, keys, time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain multi: %v", err)
		}
		for i, c := range []redis.Cmdable{a, cc, b} {
			if got := values(t, c, keys); count(got, lock.Token()) != len(keys) {
				t.Fatalf("master %d holds %q, want our token at every key", i, got)
			}
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release: %v", err)
		}
	})
}
