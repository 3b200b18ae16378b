package locker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
)

// masters starts n private Redis masters and returns them with a Redlock
// client over them. Its node timeout is generous: the tests that use it are
// about votes, not time, and on a loaded machine the default 50ms would turn a
// slow answer into a missing vote. Tests of timing use mastersWith.
func masters(t *testing.T, n int) ([]*testenv.RedisServer, []*redis.Client, *locker.Client) {
	t.Helper()
	return mastersWith(t, n, &locker.RedlockOptions{NodeTimeout: 5 * time.Second})
}

// mastersWith is masters with Redlock options. Each client has dialed its
// master before it returns, so that the first call the test times does not
// also pay for a new connection.
func mastersWith(t *testing.T, n int, opt *locker.RedlockOptions) ([]*testenv.RedisServer, []*redis.Client, *locker.Client) {
	t.Helper()
	servers := make([]*testenv.RedisServer, n)
	clients := make([]*redis.Client, n)
	rcs := make([]locker.RedisClient, n)
	for i := range servers {
		servers[i] = testenv.StartRedis(t)
		clients[i] = servers[i].Client()
		rcs[i] = clients[i]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := clients[i].Ping(ctx).Err()
		cancel()
		if err != nil {
			t.Fatalf("master %d: %v", i, err)
		}
	}
	lc, err := locker.NewRedlock(rcs, opt)
	if err != nil {
		t.Fatalf("new redlock: %v", err)
	}
	return servers, clients, lc
}

// holders returns what each master holds at key ("" when missing).
func holders(t *testing.T, clients []*redis.Client, key string) []string {
	t.Helper()
	out := make([]string, len(clients))
	for i, c := range clients {
		v, err := c.Get(context.Background(), key).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			continue // a stopped master holds nothing
		}
		out[i] = v
	}
	return out
}

func count(vals []string, want string) int {
	n := 0
	for _, v := range vals {
		if v == want {
			n++
		}
	}
	return n
}

func TestNewRedlockInvalid(t *testing.T) {
	t.Parallel()
	if _, err := locker.NewRedlock(nil, nil); err == nil {
		t.Fatalf("no masters: want an error")
	}
	if _, err := locker.NewRedlock([]locker.RedisClient{nil}, nil); err == nil {
		t.Fatalf("nil master: want an error")
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if _, err := locker.NewRedlock([]locker.RedisClient{rdb}, &locker.RedlockOptions{NodeTimeout: -time.Second}); err == nil {
		t.Fatalf("negative node timeout: want an error")
	}
}

// TestRedlockSharedMasters runs the happy path on the masters `make test`
// starts.
func TestRedlockSharedMasters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clients := testenv.RedlockMasters(t, 3)
	rcs := []locker.RedisClient{clients[0], clients[1], clients[2]}
	lc, err := locker.NewRedlock(rcs, nil)
	if err != nil {
		t.Fatalf("new redlock: %v", err)
	}
	key := testenv.Prefix(t) + "k"
	lock, err := lc.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if n := count(holders(t, clients, key), lock.Token()); n != 3 {
		t.Fatalf("%d of 3 masters hold the lock, want 3", n)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n := count(holders(t, clients, key), ""); n != 3 {
		t.Fatalf("lock left on %d masters after release", 3-n)
	}
}

func TestRedlock(t *testing.T) {
	t.Parallel()
	for _, n := range []int{3, 5} {
		quorum := n/2 + 1
		t.Run(fmt.Sprintf("%d masters", n), func(t *testing.T) {
			t.Parallel()

			t.Run("all up", func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				_, clients, lc := masters(t, n)
				key := testenv.Prefix(t) + "k"
				const ttl = 10 * time.Second
				lock, err := lc.Obtain(ctx, key, ttl, nil)
				if err != nil {
					t.Fatalf("obtain: %v", err)
				}
				if got := count(holders(t, clients, key), lock.Token()); got != n {
					t.Fatalf("%d of %d masters hold the lock", got, n)
				}
				if v := lock.Validity(); v <= 0 || v > ttl-ttl/100-2*time.Millisecond {
					t.Fatalf("validity = %v, want positive and at most ttl minus drift", v)
				}
				if ttl, err := lock.TTL(ctx); err != nil || ttl <= 9*time.Second {
					t.Fatalf("ttl = %v, %v", ttl, err)
				}
				if _, err := lc.Obtain(ctx, key, ttl, nil); !errors.Is(err, locker.ErrNotObtained) {
					t.Fatalf("second obtain: err = %v, want ErrNotObtained", err)
				}
				if got := count(holders(t, clients, key), lock.Token()); got != n {
					t.Fatalf("failed obtain disturbed the lock: %d of %d masters hold it", got, n)
				}
				if err := lock.Refresh(ctx, time.Hour, nil); err != nil {
					t.Fatalf("refresh: %v", err)
				}
				for i, c := range clients {
					if pttl := c.PTTL(ctx, key).Val(); pttl <= 59*time.Minute {
						t.Fatalf("master %d: pttl after refresh = %v", i, pttl)
					}
				}
				if err := lock.Release(ctx); err != nil {
					t.Fatalf("release: %v", err)
				}
				if got := count(holders(t, clients, key), ""); got != n {
					t.Fatalf("lock left on %d masters after release", n-got)
				}
			})

			t.Run("minority down", func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				servers, clients, lc := masters(t, n)
				for _, s := range servers[:n-quorum] {
					s.Stop()
				}
				key := testenv.Prefix(t) + "k"
				lock, err := lc.Obtain(ctx, key, 10*time.Second, nil)
				if err != nil {
					t.Fatalf("obtain with %d of %d masters down: %v", n-quorum, n, err)
				}
				if got := count(holders(t, clients, key), lock.Token()); got != quorum {
					t.Fatalf("%d masters hold the lock, want %d", got, quorum)
				}
				if err := lock.Refresh(ctx, 10*time.Second, nil); err != nil {
					t.Fatalf("refresh: %v", err)
				}
				if ttl, err := lock.TTL(ctx); err != nil || ttl <= 0 {
					t.Fatalf("ttl = %v, %v", ttl, err)
				}
				if err := lock.Release(ctx); err != nil {
					t.Fatalf("release: %v", err)
				}
			})

			t.Run("majority down", func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				servers, clients, lc := masters(t, n)
				for _, s := range servers[:quorum] {
					s.Stop()
				}
				key := testenv.Prefix(t) + "k"
				lock, err := lc.Obtain(ctx, key, 10*time.Second, nil)
				if err == nil {
					t.Fatalf("obtained %q with %d of %d masters down", lock.Key(), quorum, n)
				}
				if errors.Is(err, locker.ErrNotObtained) {
					t.Fatalf("err = %v: an outage must not look like contention", err)
				}
				if got := count(holders(t, clients[quorum:], key), ""); got != n-quorum {
					t.Fatalf("failed obtain left the key on %d live masters", n-quorum-got)
				}
			})

			t.Run("key preset on a minority", func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				_, clients, lc := masters(t, n)
				key := testenv.Prefix(t) + "k"
				for _, c := range clients[:n-quorum] {
					c.Set(ctx, key, "stale", time.Minute)
				}
				lock, err := lc.Obtain(ctx, key, 10*time.Second, nil)
				if err != nil {
					t.Fatalf("obtain: %v", err)
				}
				hs := holders(t, clients, key)
				if count(hs, lock.Token()) != quorum || count(hs, "stale") != n-quorum {
					t.Fatalf("masters hold %q, want %d x our token and %d x stale", hs, quorum, n-quorum)
				}
				if err := lock.Release(ctx); err != nil {
					t.Fatalf("release: %v", err)
				}
				if hs := holders(t, clients, key); count(hs, "stale") != n-quorum {
					t.Fatalf("release deleted another token's keys: %q", hs)
				}
			})

			t.Run("no second holder after a flush", func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				_, clients, lc := masters(t, n)
				key := testenv.Prefix(t) + "k"
				first, err := lc.Obtain(ctx, key, time.Minute, nil)
				if err != nil {
					t.Fatalf("obtain: %v", err)
				}
				if err := clients[0].FlushAll(ctx).Err(); err != nil {
					t.Fatalf("flushall: %v", err)
				}
				if _, err := lc.Obtain(ctx, key, time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
					t.Fatalf("second client after flush: err = %v, want ErrNotObtained", err)
				}
				hs := holders(t, clients, key)
				if hs[0] != "" {
					t.Fatalf("failed obtain left its lock on the flushed master: %q", hs[0])
				}
				if count(hs, first.Token()) != n-1 {
					t.Fatalf("first holder's lock changed: %q", hs)
				}
				if err := first.Refresh(ctx, time.Minute, nil); err != nil {
					t.Fatalf("first holder's refresh after a flush: %v", err)
				}
				if hs := holders(t, clients, key); hs[0] != "" {
					t.Fatalf("refresh re-created the flushed key")
				}
			})

			t.Run("refresh and release need the quorum", func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				_, clients, lc := masters(t, n)
				key := testenv.Prefix(t) + "k"
				lock, err := lc.Obtain(ctx, key, time.Minute, nil)
				if err != nil {
					t.Fatalf("obtain: %v", err)
				}
				for _, c := range clients[:quorum] {
					c.Del(ctx, key)
				}
				if err := lock.Refresh(ctx, time.Minute, nil); !errors.Is(err, locker.ErrNotHeld) {
					t.Fatalf("refresh with the quorum lost: err = %v, want ErrNotHeld", err)
				}
				if got := count(holders(t, clients, key), ""); got != n {
					t.Fatalf("lock left on %d masters after a failed refresh", n-got)
				}
				if err := lock.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
					t.Fatalf("release of a lost lock: err = %v, want ErrNotHeld", err)
				}
			})

			t.Run("obtain any", func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				_, clients, lc := masters(t, n)
				p := testenv.Prefix(t)
				keys := []string{p + "a", p + "b", p + "c", p + "d"}
				for _, c := range clients {
					c.Set(ctx, keys[0], "other", time.Minute)
				}
				// The masters disagree on the second key: a minority thinks
				// it is taken, so they grant the third instead.
				for _, c := range clients[:n-quorum] {
					c.Set(ctx, keys[1], "stale", time.Minute)
				}
				lock, err := lc.ObtainAny(ctx, keys, time.Minute, nil)
				if err != nil {
					t.Fatalf("obtain any: %v", err)
				}
				if lock.Key() != keys[1] {
					t.Fatalf("obtained %q, want %q", lock.Key(), keys[1])
				}
				for _, k := range keys[2:] {
					if hs := holders(t, clients, k); count(hs, "") != n {
						t.Fatalf("stray lock on %s: %q", k, hs)
					}
				}
			})

			t.Run("hung master", func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				// Clients without socket timeouts: only the locker's node
				// timeout ends the call to the hung master, and without it
				// Obtain would never return. A node timeout of a second, not
				// the default 50ms: the healthy masters must answer within
				// it on a loaded machine too, and each client is connected
				// first, so that the obtain waits for no dial.
				servers := make([]*testenv.RedisServer, n)
				rcs := make([]locker.RedisClient, n)
				for i := range servers {
					servers[i] = testenv.StartRedis(t)
					c := redis.NewClient(&redis.Options{
						Addr: servers[i].Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
						ReadTimeout: -1, WriteTimeout: -1,
					})
					t.Cleanup(func() { _ = c.Close() })
					if err := c.Ping(ctx).Err(); err != nil {
						t.Fatalf("ping master %d: %v", i, err)
					}
					rcs[i] = c
				}
				lc, err := locker.NewRedlock(rcs, &locker.RedlockOptions{NodeTimeout: time.Second})
				if err != nil {
					t.Fatalf("new redlock: %v", err)
				}
				servers[0].Pause()
				key := testenv.Prefix(t) + "k"
				lock, err := lc.Obtain(ctx, key, time.Hour, nil)
				if err != nil {
					t.Fatalf("obtain with a hung master: %v", err)
				}
				if v := lock.Validity(); v <= 0 {
					t.Fatalf("validity = %v after obtaining past a hung master", v)
				}
			})
		})
	}
}
