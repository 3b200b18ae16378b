package locker_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
)

// The client types the locker accepts, checked at compile time.
var (
	_ locker.RedisClient = (*redis.Client)(nil)
	_ locker.RedisClient = (*redis.ClusterClient)(nil)
	_ locker.RedisClient = (*faultyClient)(nil)
)

func TestObtainRelease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "k"

	start := time.Now()
	lock, err := lc.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if lock.Key() != key {
		t.Fatalf("key = %q, want %q", lock.Key(), key)
	}
	if got := rdb.Get(ctx, key).Val(); got != lock.Token() {
		t.Fatalf("redis holds %q, want the lock's token %q", got, lock.Token())
	}
	if n := len(lock.Token()); n < 22 { // 128 bits need at least 22 base64 or 26 base32 characters
		t.Fatalf("token %q is too short to carry 128 random bits", lock.Token())
	}
	if v := lock.Validity(); !setSince(v, time.Minute-redlockDrift(time.Minute), start) {
		t.Fatalf("validity = %v, want just under 1m (ttl minus elapsed minus drift)", v)
	}
	if ttl, err := lock.TTL(ctx); err != nil || !setSince(ttl, time.Minute, start) {
		t.Fatalf("ttl = %v, %v; want about 1m", ttl, err)
	}

	if _, err := lc.Obtain(ctx, key, time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("second obtain: err = %v, want ErrNotObtained", err)
	}

	if err := lock.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("key still exists after release")
	}
	if err := lock.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("second release: err = %v, want ErrNotHeld", err)
	}
	if ttl, err := lock.TTL(ctx); err != nil || ttl != 0 {
		t.Fatalf("ttl after release = %v, %v; want 0, nil", ttl, err)
	}
	if v := lock.Validity(); v != 0 {
		t.Fatalf("validity after release = %v, want 0", v)
	}

	again, err := lc.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("obtain after release: %v", err)
	}
	if again.Token() == lock.Token() {
		t.Fatalf("two obtains produced the same random token %q", again.Token())
	}
	_ = again.Release(ctx)
}

func TestObtainInvalidInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "k"

	for name, call := range map[string]func() error{
		"zero ttl":     func() error { _, err := lc.Obtain(ctx, key, 0, nil); return err },
		"tiny ttl":     func() error { _, err := lc.Obtain(ctx, key, time.Millisecond, nil); return err },
		"empty key":    func() error { _, err := lc.Obtain(ctx, "", time.Second, nil); return err },
		"no keys":      func() error { _, err := lc.ObtainAny(ctx, nil, time.Second, nil); return err },
		"one key emty": func() error { _, err := lc.ObtainAny(ctx, []string{key, ""}, time.Second, nil); return err },
	} {
		err := call()
		if err == nil || errors.Is(err, locker.ErrNotObtained) {
			t.Errorf("%s: err = %v, want a validation error", name, err)
		}
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("invalid calls created the key")
	}
}

func TestCustomTokenIsReentrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "k"

	first, err := lc.Obtain(ctx, key, time.Second, &locker.Options{Token: "holder-1"})
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if first.Token() != "holder-1" {
		t.Fatalf("token = %q, want holder-1", first.Token())
	}
	start := time.Now()
	again, err := lc.Obtain(ctx, key, time.Minute, &locker.Options{Token: "holder-1"})
	if err != nil {
		t.Fatalf("obtain again with the same token: %v", err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); !setSince(ttl, time.Minute, start) {
		t.Fatalf("reentrant obtain did not set the new ttl: %v", ttl)
	}
	if _, err := lc.Obtain(ctx, key, time.Minute, &locker.Options{Token: "holder-2"}); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("obtain with another token: err = %v, want ErrNotObtained", err)
	}
	if err := again.Release(ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
}

// TestContention has 100 goroutines fight over one key: at no moment do two
// of them believe they hold it, and every one of them gets it in the end.
func TestContention(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "hot"

	const workers = 100
	var (
		holders, maxHolders atomic.Int32
		obtained            atomic.Int32
		wg                  sync.WaitGroup
		errs                = make(chan error, workers)
	)
	opts := &locker.Options{RetryStrategy: locker.ExponentialBackoff(time.Millisecond, 20*time.Millisecond)}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lock, err := lc.Obtain(ctx, key, 5*time.Second, opts)
			if err != nil {
				errs <- err
				return
			}
			n := holders.Add(1)
			for {
				m := maxHolders.Load()
				if n <= m || maxHolders.CompareAndSwap(m, n) {
					break
				}
			}
			// Do a little "work" that needs Redis while holding the lock.
			if got := rdb.Get(ctx, key).Val(); got != lock.Token() {
				errs <- fmt.Errorf("holder sees token %q in redis, want its own %q", got, lock.Token())
			}
			holders.Add(-1)
			obtained.Add(1)
			if err := lock.Release(ctx); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m := maxHolders.Load(); m != 1 {
		t.Fatalf("at most %d goroutines held the lock at once, want exactly 1", m)
	}
	if n := obtained.Load(); n != workers {
		t.Fatalf("%d of %d goroutines obtained the lock", n, workers)
	}
}

// setSince reports whether left, read just now, is what is left of ttl set after
// start: no more than ttl, and no less than ttl minus the time since start (and
// a millisecond of Redis's rounding). Bounds from the test's own clock, so that a
// slow machine does not fail it.
func setSince(left, ttl time.Duration, start time.Time) bool {
	return left <= ttl && left >= ttl-time.Since(start)-time.Millisecond
}

// redlockDrift is the clock drift allowance the locker subtracts from a lock's
// validity: 1% of the ttl plus 2ms, as in the Redlock algorithm.
func redlockDrift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// waitGone waits, with a deadline, until key no longer exists in Redis.
func waitGone(t *testing.T, rdb redis.Cmdable, key string) {
	t.Helper()
	testenv.Eventually(t, 5*time.Second, "key "+key+" expired", func() bool {
		return rdb.Exists(context.Background(), key).Val() == 0
	})
}

func TestExpiredLockCannotTouchSuccessor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "k"

	stale, err := lc.Obtain(ctx, key, 50*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	waitGone(t, rdb, key)
	if v := stale.Validity(); v != 0 {
		t.Fatalf("validity of an expired lock = %v, want 0", v)
	}
	start := time.Now()
	successor, err := lc.Obtain(ctx, key, time.Minute, nil)
	if err != nil {
		t.Fatalf("successor obtain: %v", err)
	}

	if err := stale.Refresh(ctx, time.Hour, nil); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("stale refresh: err = %v, want ErrNotHeld", err)
	}
	if err := stale.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("stale release: err = %v, want ErrNotHeld", err)
	}
	if ttl, err := stale.TTL(ctx); err != nil || ttl != 0 {
		t.Fatalf("stale ttl = %v, %v; want 0, nil", ttl, err)
	}
	if got := rdb.Get(ctx, key).Val(); got != successor.Token() {
		t.Fatalf("redis holds %q, want the successor's token", got)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); !setSince(ttl, time.Minute, start) {
		t.Fatalf("successor's ttl = %v: the stale refresh changed it", ttl)
	}
	if err := successor.Release(ctx); err != nil {
		t.Fatalf("successor release: %v", err)
	}
}

func TestRefresh(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "k"

	lock, err := lc.Obtain(ctx, key, time.Second, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if err := lock.Refresh(ctx, time.Hour, nil); err != nil {
		t.Fatalf("refresh: %v", err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl <= 59*time.Minute {
		t.Fatalf("ttl after refresh = %v, want about 1h", ttl)
	}
	if v := lock.Validity(); v <= 59*time.Minute {
		t.Fatalf("validity after refresh = %v, want about 1h", v)
	}
	if err := lock.Refresh(ctx, 0, nil); err == nil || errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("refresh with zero ttl: err = %v, want a validation error", err)
	}

	// A lost lock stays lost: refresh must not create the key again.
	rdb.Del(ctx, key)
	if err := lock.Refresh(ctx, time.Hour, nil); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("refresh of a deleted lock: err = %v, want ErrNotHeld", err)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("refresh resurrected the deleted key")
	}
	if ttl, err := lock.TTL(ctx); err != nil || ttl != 0 {
		t.Fatalf("ttl of a lost lock = %v, %v; want 0, nil", ttl, err)
	}
}

// TestNilLock: a failed obtain returns a nil *Lock, and every method of it
// reports a lock that is not held instead of panicking, so that a deferred
// Release before the error check is safe.
func TestNilLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	p := testenv.Prefix(t)
	holder, err := lc.Obtain(ctx, p+"k", time.Minute, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}

	for name, obtain := range map[string]func() (*locker.Lock, error){
		"obtain":       func() (*locker.Lock, error) { return lc.Obtain(ctx, p+"k", time.Minute, nil) },
		"obtain any":   func() (*locker.Lock, error) { return lc.ObtainAny(ctx, []string{p + "k"}, time.Minute, nil) },
		"obtain multi": func() (*locker.Lock, error) { return lc.ObtainMulti(ctx, []string{p + "j", p + "k"}, time.Minute, nil) },
		"invalid":      func() (*locker.Lock, error) { return lc.Obtain(ctx, "", time.Minute, nil) },
	} {
		func() {
			lock, err := obtain()
			defer func() {
				if err := lock.Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
					t.Errorf("%s: deferred release of the failed lock: err = %v, want ErrNotHeld", name, err)
				}
			}()
			if err == nil || lock != nil {
				t.Fatalf("%s: lock = %v, err = %v; want nil and an error", name, lock, err)
			}
		}()
	}

	var lock *locker.Lock
	if err := lock.Refresh(ctx, time.Minute, nil); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("refresh: err = %v, want ErrNotHeld", err)
	}
	retry := &locker.Options{RetryStrategy: locker.LinearBackoff(time.Millisecond)}
	if err := lock.Refresh(ctx, time.Minute, retry); !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("refresh with retries: err = %v, want ErrNotHeld", err)
	}
	if ttl, err := lock.TTL(ctx); ttl != 0 || !errors.Is(err, locker.ErrNotHeld) {
		t.Errorf("ttl = %v, %v; want 0, ErrNotHeld", ttl, err)
	}
	if k, tok, keys, v := lock.Key(), lock.Token(), lock.Keys(), lock.Validity(); k != "" || tok != "" || keys != nil || v != 0 {
		t.Errorf("key, token, keys, validity = %q, %q, %q, %v; want zero values", k, tok, keys, v)
	}
	work, stop := lock.KeepAlive(ctx, time.Minute)
	select {
	case <-work.Done():
	default:
		t.Errorf("keep-alive of a nil lock: the work context is not cancelled")
	}
	if cause := context.Cause(work); !errors.Is(cause, locker.ErrNotHeld) {
		t.Errorf("keep-alive of a nil lock: cause = %v, want ErrNotHeld", cause)
	}
	stop()
	stop()

	// None of it touched the holder's lock; ReleaseAll skips nil locks.
	if got := rdb.Get(ctx, p+"k").Val(); got != holder.Token() {
		t.Fatalf("redis holds %q, want the holder's token", got)
	}
	if n, err := lc.ReleaseAll(ctx, []*locker.Lock{nil, holder, nil}); n != 1 || err != nil {
		t.Fatalf("release all with nil locks = %d, %v; want 1, nil", n, err)
	}
	if n := rdb.Exists(ctx, p+"k").Val(); n != 0 {
		t.Fatalf("holder's lock not released")
	}
}

// TestRefreshRetries: Refresh retries transient errors as its retry strategy
// says, and nothing else.
func TestRefreshRetries(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	retry := &locker.Options{RetryStrategy: locker.LinearBackoff(time.Millisecond)}

	// setup obtains a lock for ttl through a client whose calls fail as
	// fail says (n counts from 1 at the first refresh attempt), and returns
	// it with the number of refresh attempts made so far.
	setup := func(t *testing.T, ttl time.Duration, fail func(n int64) error) (*locker.Lock, func() int64) {
		t.Helper()
		calls := &counter{}
		var armed atomic.Bool
		lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls, fail: func(n int64) error {
			if !armed.Load() || fail == nil {
				return nil
			}
			return fail(n)
		}})
		lock, err := lc.Obtain(context.Background(), testenv.Prefix(t)+"k", ttl, nil)
		if err != nil {
			t.Fatalf("obtain: %v", err)
		}
		calls.n.Store(0)
		armed.Store(true)
		return lock, calls.n.Load
	}

	for name, injected := range map[string]error{
		"connection refused": &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		"timeout":            context.DeadlineExceeded,
		"loading":            redisError("LOADING Redis is loading the dataset in memory"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			lock, attempts := setup(t, time.Minute, func(n int64) error {
				if n <= 3 {
					return injected
				}
				return nil
			})
			if err := lock.Refresh(ctx, time.Hour, retry); err != nil {
				t.Fatalf("refresh: %v", err)
			}
			if n := attempts(); n != 4 {
				t.Fatalf("%d attempts, want 3 failed + 1", n)
			}
			if ttl := rdb.PTTL(ctx, lock.Key()).Val(); ttl <= 59*time.Minute {
				t.Fatalf("pttl after refresh = %v, want about 1h", ttl)
			}
			if v := lock.Validity(); v <= 59*time.Minute {
				t.Fatalf("validity after refresh = %v, want about 1h", v)
			}
		})
	}

	t.Run("no options, one attempt", func(t *testing.T) {
		t.Parallel()
		injected := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		lock, attempts := setup(t, time.Minute, func(int64) error { return injected })
		err := lock.Refresh(context.Background(), time.Hour, nil)
		if !errors.Is(err, injected) || errors.Is(err, locker.ErrNotHeld) {
			t.Fatalf("err = %v, want the injected error", err)
		}
		if n := attempts(); n != 1 {
			t.Fatalf("%d attempts, want 1", n)
		}
	})

	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		injected := redisError("LOADING Redis is loading the dataset in memory")
		lock, attempts := setup(t, time.Minute, func(int64) error { return injected })
		err := lock.Refresh(context.Background(), time.Hour,
			&locker.Options{RetryStrategy: locker.LimitRetry(locker.LinearBackoff(time.Millisecond), 2)})
		if !errors.Is(err, injected) {
			t.Fatalf("err = %v, want the injected error", err)
		}
		if n := attempts(); n != 3 {
			t.Fatalf("%d attempts, want 3 (1 + 2 retries)", n)
		}
	})

	t.Run("permanent error", func(t *testing.T) {
		t.Parallel()
		injected := redisError("NOPERM this user has no permissions to run the 'evalsha' command")
		lock, attempts := setup(t, time.Minute, func(int64) error { return injected })
		if err := lock.Refresh(context.Background(), time.Hour, retry); !errors.Is(err, injected) {
			t.Fatalf("err = %v, want the injected error", err)
		}
		if n := attempts(); n != 1 {
			t.Fatalf("%d attempts, want 1: permanent errors are not retried", n)
		}
	})

	t.Run("lost lock", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		for _, lose := range []string{"expired", "taken"} {
			lock, attempts := setup(t, 50*time.Millisecond, nil)
			if lose == "expired" {
				waitGone(t, rdb, lock.Key())
			} else {
				rdb.Set(ctx, lock.Key(), "thief", time.Minute)
			}
			if err := lock.Refresh(ctx, time.Hour, retry); !errors.Is(err, locker.ErrNotHeld) {
				t.Fatalf("%s: err = %v, want ErrNotHeld", lose, err)
			}
			if n := attempts(); n != 1 {
				t.Fatalf("%s: %d attempts, want 1: a lost lock is not retried", lose, n)
			}
			if got := rdb.Get(ctx, lock.Key()).Val(); lose == "expired" && got != "" || lose == "taken" && got != "thief" {
				t.Fatalf("%s: redis holds %q after the refresh", lose, got)
			}
		}
	})

	t.Run("not past the validity", func(t *testing.T) {
		t.Parallel()
		injected := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		lock, attempts := setup(t, time.Second, func(int64) error { return injected })
		// The next retry would come an hour after a validity of under 1s: a
		// refresh that waited for it would hang the test.
		err := lock.Refresh(context.Background(), time.Hour, &locker.Options{RetryStrategy: locker.LinearBackoff(time.Hour)})
		if !errors.Is(err, injected) || !strings.Contains(err.Error(), "validity ends first") {
			t.Fatalf("err = %v, want the injected error, not retried past the validity", err)
		}
		if n := attempts(); n != 1 {
			t.Fatalf("%d attempts, want 1", n)
		}
	})

	t.Run("context", func(t *testing.T) {
		t.Parallel()
		injected := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		hourly := &locker.Options{RetryStrategy: locker.LinearBackoff(time.Hour)}

		// Cancelled while the first attempt fails: no wait for the backoff,
		// and the error says why, even though the lock's validity would
		// have stopped the retries too.
		ctx, cancel := context.WithCancelCause(context.Background())
		stopped := errors.New("job stopped")
		lock, attempts := setup(t, time.Second, func(int64) error { cancel(stopped); return injected })
		err := lock.Refresh(ctx, time.Hour, hourly)
		if !errors.Is(err, injected) || !errors.Is(err, stopped) {
			t.Fatalf("cancelled: err = %v, want the injected error joined with the cause", err)
		}
		if n := attempts(); n != 1 {
			t.Fatalf("cancelled: %d attempts, want 1", n)
		}

		// A deadline before the next retry: give up at once.
		ctx, cancelTimeout := context.WithTimeout(context.Background(), time.Minute)
		defer cancelTimeout()
		lock, _ = setup(t, 2*time.Hour, func(int64) error { return injected })
		err = lock.Refresh(ctx, time.Hour, hourly)
		if !errors.Is(err, injected) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("deadline: err = %v, want the injected error joined with DeadlineExceeded", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("deadline: refresh waited for the deadline instead of giving up at once")
		}
	})

	// A real outage: the server hangs (SIGSTOP) and every attempt times out
	// until it answers again.
	t.Run("hung server", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		srv := testenv.StartRedis(t)
		rdb := redis.NewClient(&redis.Options{
			Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: 100 * time.Millisecond, WriteTimeout: 100 * time.Millisecond,
		})
		t.Cleanup(func() { _ = rdb.Close() })
		calls := &counter{}
		lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls})
		lock, err := lc.Obtain(ctx, testenv.Prefix(t)+"k", time.Minute, nil)
		if err != nil {
			t.Fatalf("obtain: %v", err)
		}

		srv.Pause()
		before := calls.n.Load()
		done := make(chan error, 1)
		go func() {
			done <- lock.Refresh(ctx, time.Hour, &locker.Options{RetryStrategy: locker.LinearBackoff(10 * time.Millisecond)})
		}()
		waitFor(t, "a second refresh attempt", func() bool { return calls.n.Load()-before >= 2 })
		srv.Resume()
		if err := <-done; err != nil {
			t.Fatalf("refresh through the outage: %v", err)
		}
		if ttl := rdb.PTTL(ctx, lock.Key()).Val(); ttl <= 59*time.Minute {
			t.Fatalf("pttl after refresh = %v, want about 1h", ttl)
		}
	})
}

func TestObtainRetriesUntilFree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "k"

	holder, err := lc.Obtain(ctx, key, 100*time.Millisecond, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	// The holder's lease runs out while the second caller retries.
	lock, err := lc.Obtain(ctx, key, time.Second, &locker.Options{RetryStrategy: locker.LinearBackoff(10 * time.Millisecond)})
	if err != nil {
		t.Fatalf("obtain with retries: %v", err)
	}
	if lock.Token() == holder.Token() {
		t.Fatalf("same token twice")
	}
	_ = lock.Release(ctx)
}

func TestObtainHonoursContext(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "k"
	holder, err := lc.Obtain(context.Background(), key, time.Minute, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	defer holder.Release(context.Background())

	t.Run("deadline while retrying", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := lc.Obtain(ctx, key, time.Second, &locker.Options{RetryStrategy: locker.LinearBackoff(10 * time.Millisecond)})
		if !errors.Is(err, locker.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrNotObtained joined with DeadlineExceeded", err)
		}
	})
	t.Run("backoff beyond deadline", func(t *testing.T) {
		// The backoff (an hour) outlasts the deadline (a minute): Obtain
		// gives up at once, long before the deadline on any machine.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := lc.Obtain(ctx, key, time.Second, &locker.Options{RetryStrategy: locker.LinearBackoff(time.Hour)})
		if !errors.Is(err, locker.ErrNotObtained) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrNotObtained joined with DeadlineExceeded", err)
		}
		if ctx.Err() != nil {
			t.Fatalf("obtain waited for the deadline instead of giving up at once")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		_, err := lc.Obtain(ctx, key, time.Second, &locker.Options{RetryStrategy: locker.LinearBackoff(10 * time.Millisecond)})
		if !errors.Is(err, locker.ErrNotObtained) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want ErrNotObtained joined with Canceled", err)
		}
	})
	t.Run("limit", func(t *testing.T) {
		calls := &counter{}
		lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls})
		_, err := lc.Obtain(context.Background(), key, time.Second,
			&locker.Options{RetryStrategy: locker.LimitRetry(locker.LinearBackoff(time.Millisecond), 3)})
		if !errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("err = %v, want ErrNotObtained", err)
		}
		if n := calls.n.Load(); n != 4 {
			t.Fatalf("%d attempts, want 4 (1 + 3 retries)", n)
		}
	})
}

func TestObtainAny(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	calls := &counter{}
	lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls})
	p := testenv.Prefix(t)
	keys := make([]string, 20)
	for i := range keys {
		keys[i] = fmt.Sprintf("%stask:%d", p, i)
	}
	// The first 7 candidates are taken by someone else.
	for _, k := range keys[:7] {
		rdb.Set(ctx, k, "other", time.Minute)
	}

	// Load the scripts into the server's cache, so that what is counted
	// below is the steady state.
	warm, err := lc.ObtainAny(ctx, []string{p + "warm", p + "up"}, time.Minute, nil)
	if err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	_ = warm.Release(ctx)
	calls.n.Store(0)

	lock, err := lc.ObtainAny(ctx, keys, time.Minute, nil)
	if err != nil {
		t.Fatalf("obtain any: %v", err)
	}
	if lock.Key() != keys[7] {
		t.Fatalf("obtained %q, want the first free key %q", lock.Key(), keys[7])
	}
	if n := calls.n.Load(); n != 1 {
		t.Fatalf("obtain any took %d round trips, want 1", n)
	}
	for i, k := range keys {
		got := rdb.Get(ctx, k).Val()
		switch {
		case i < 7 && got != "other":
			t.Errorf("%s: holder's lock was changed to %q", k, got)
		case i == 7 && got != lock.Token():
			t.Errorf("%s: holds %q, want our token", k, got)
		case i > 7 && got != "":
			t.Errorf("%s: stray lock %q", k, got)
		}
	}

	// All taken: ErrNotObtained and nothing changes.
	for _, k := range keys[8:] {
		rdb.Set(ctx, k, "other", time.Minute)
	}
	if _, err := lc.ObtainAny(ctx, keys, time.Minute, nil); !errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("obtain any with all taken: err = %v, want ErrNotObtained", err)
	}
	if got := rdb.Get(ctx, keys[7]).Val(); got != lock.Token() {
		t.Fatalf("failed obtain changed an existing lock")
	}
}

func TestScriptCacheFlushed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := testenv.StartRedis(t)
	rdb := srv.Client()
	lc := locker.New(rdb)
	key := testenv.Prefix(t) + "k"

	lock, err := lc.ObtainAny(ctx, []string{key + "a", key + "b"}, time.Minute, nil)
	if err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("script flush: %v", err)
	}
	if err := lock.Refresh(ctx, time.Minute, nil); err != nil {
		t.Fatalf("refresh after script flush: %v", err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatalf("script flush: %v", err)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("release after script flush: %v", err)
	}
}

// TestTransientErrorsRetried injects connection failures: Obtain retries
// them like a busy key and succeeds when Redis answers again.
func TestTransientErrorsRetried(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	key := testenv.Prefix(t) + "k"

	for name, injected := range map[string]error{
		"connection refused": &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		"loading":            redisError("LOADING Redis is loading the dataset in memory"),
		"failover":           redisError("READONLY You can't write against a read only replica."),
	} {
		calls := &counter{}
		fc := &faultyClient{RedisClient: rdb, calls: calls, fail: func(n int64) error {
			if n <= 3 {
				return injected
			}
			return nil
		}}
		lc := locker.New(fc)
		lock, err := lc.Obtain(ctx, key, time.Minute, &locker.Options{RetryStrategy: locker.LinearBackoff(time.Millisecond)})
		if err != nil {
			t.Fatalf("%s: obtain: %v", name, err)
		}
		if n := calls.n.Load(); n != 4 {
			t.Fatalf("%s: %d attempts, want 3 failed + 1", name, n)
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("%s: release: %v", name, err)
		}

		// Without retries the transient error is surfaced as it is, not as
		// contention.
		calls.n.Store(0)
		_, err = lc.Obtain(ctx, key, time.Minute, nil)
		if !errors.Is(err, injected) || errors.Is(err, locker.ErrNotObtained) {
			t.Fatalf("%s: obtain without retry: err = %v, want the injected error", name, err)
		}
	}
}

func TestPermanentErrorsSurfaced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	key := testenv.Prefix(t) + "k"
	injected := redisError("NOPERM this user has no permissions to run the 'set' command")
	calls := &counter{}
	lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls, fail: func(int64) error { return injected }})

	_, err := lc.Obtain(ctx, key, time.Minute, &locker.Options{RetryStrategy: locker.LinearBackoff(time.Millisecond)})
	if !errors.Is(err, injected) {
		t.Fatalf("err = %v, want the injected error", err)
	}
	if errors.Is(err, locker.ErrNotObtained) {
		t.Fatalf("a permanent error was reported as contention: %v", err)
	}
	if n := calls.n.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1: permanent errors are not retried", n)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("key exists after a failed obtain")
	}
}

func TestKeepAlive(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	const ttl = 450 * time.Millisecond // refreshed every 150ms: room for a loaded machine

	t.Run("renews past the ttl", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		calls := &counter{}
		lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls})
		key := testenv.Prefix(t) + "k"
		firstExpiry := time.Now().Add(ttl)
		lock, err := lc.Obtain(ctx, key, ttl, nil)
		if err != nil {
			t.Fatalf("obtain: %v", err)
		}
		obtained := calls.n.Load()
		work, stop := lock.KeepAlive(ctx, ttl)
		// The work outlives the first ttl: counted refreshes, not a sleep.
		waitFor(t, "four refreshes, past the first ttl", func() bool {
			return calls.n.Load()-obtained >= 5 && time.Now().After(firstExpiry)
		})
		if err := context.Cause(work); err != nil {
			t.Fatalf("work context ended: %v", err)
		}
		if got := rdb.Get(ctx, key).Val(); got != lock.Token() {
			t.Fatalf("after %d refreshes redis holds %q, want our token", calls.n.Load()-obtained, got)
		}
		stop()
		stop() // idempotent
		if !errors.Is(context.Cause(work), context.Canceled) {
			t.Fatalf("work context after stop: cause = %v, want Canceled", context.Cause(work))
		}
		if err := lock.Release(ctx); err != nil {
			t.Fatalf("release after stop: %v", err)
		}
	})

	t.Run("cancels on loss", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		lc := locker.New(rdb)
		key := testenv.Prefix(t) + "k"
		lock, err := lc.Obtain(ctx, key, ttl, nil)
		if err != nil {
			t.Fatalf("obtain: %v", err)
		}
		work, stop := lock.KeepAlive(ctx, ttl)
		defer stop()
		rdb.Set(ctx, key, "thief", time.Minute) // someone else has it now
		waitFor(t, "the work context cancelled after the lock was lost", func() bool { return work.Err() != nil })
		if cause := context.Cause(work); !errors.Is(cause, locker.ErrNotHeld) {
			t.Fatalf("cause = %v, want ErrNotHeld", cause)
		}
		if got := rdb.Get(ctx, key).Val(); got != "thief" {
			t.Fatalf("keep-alive touched the new holder's lock: %q", got)
		}
	})

	t.Run("transient errors within validity", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		key := testenv.Prefix(t) + "k"
		// Refreshed every 1s, retried every 250ms after a failure: two
		// failures cost 500ms of a validity of almost 3s.
		const ttl = 3 * time.Second
		var (
			lock     *locker.Lock
			failures atomic.Int64 // how many of the next calls fail
			low      atomic.Int64 // the lock's validity at the last failure
		)
		lc := locker.New(&faultyClient{RedisClient: rdb, calls: &counter{}, fail: func(int64) error {
			left := failures.Add(-1)
			if left < 0 {
				return nil
			}
			if left == 0 {
				low.Store(int64(lock.Validity()))
			}
			return &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
		}})
		lock, err := lc.Obtain(ctx, key, ttl, nil)
		if err != nil {
			t.Fatalf("obtain: %v", err)
		}
		failures.Store(2)
		work, stop := lock.KeepAlive(ctx, ttl)
		defer stop()

		// The first two refreshes fail; the third renews the lock, which
		// shows as its validity going up: until then it only goes down.
		waitFor(t, "both failures injected", func() bool { return failures.Load() < 0 })
		waitFor(t, "the lock renewed after the failures", func() bool { return lock.Validity() > time.Duration(low.Load()) })
		if err := context.Cause(work); err != nil {
			t.Fatalf("work context ended after a short outage: %v", err)
		}
		if got := rdb.Get(ctx, key).Val(); got != lock.Token() {
			t.Fatalf("after the outage redis holds %q, want our token", got)
		}

		// An outage longer than the validity ends the work.
		failures.Store(math.MaxInt64)
		waitFor(t, "the work context cancelled after the validity ran out", func() bool { return work.Err() != nil })
		if cause := context.Cause(work); !errors.Is(cause, locker.ErrNotHeld) {
			t.Fatalf("cause = %v, want ErrNotHeld", cause)
		}
	})
}

// waitFor waits, with a deadline, until cond holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, what, cond)
}

// counter counts the commands and pipelines a faultyClient sends: each is
// one round trip to Redis.
type counter struct{ n atomic.Int64 }

// faultyClient wraps a Redis client and fails calls on demand: fail gets the
// 1-based number of the call and returns the error to inject, or nil.
type faultyClient struct {
	locker.RedisClient
	calls *counter
	fail  func(n int64) error
}

func (f *faultyClient) inject() error {
	n := f.calls.n.Add(1)
	if f.fail == nil {
		return nil
	}
	return f.fail(n)
}

func (f *faultyClient) SetNX(ctx context.Context, key string, value any, exp time.Duration) *redis.BoolCmd {
	if err := f.inject(); err != nil {
		cmd := redis.NewBoolCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	return f.RedisClient.SetNX(ctx, key, value, exp)
}

func (f *faultyClient) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	if err := f.inject(); err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	return f.RedisClient.EvalSha(ctx, sha, keys, args...)
}

func (f *faultyClient) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if err := f.inject(); err != nil {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(err)
		return cmd
	}
	return f.RedisClient.Eval(ctx, script, keys, args...)
}

func (f *faultyClient) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	if err := f.inject(); err != nil {
		return nil, err
	}
	return f.RedisClient.Pipelined(ctx, fn)
}

// redisError is an error reply from the server.
type redisError string

func (e redisError) Error() string { return string(e) }
func (redisError) RedisError()     {}

func TestLockHandleFromAnotherProcess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	key := testenv.Prefix(t) + "k"
	first, second := locker.New(rdb), locker.New(rdb) // two processes

	if _, err := first.Obtain(ctx, key, time.Minute, &locker.Options{Token: "editor:7"}); err != nil {
		t.Fatalf("obtain: %v", err)
	}
	if err := second.Lock(key, "editor:8").Release(ctx); !errors.Is(err, locker.ErrNotHeld) {
		t.Fatalf("release under another token: err = %v, want ErrNotHeld", err)
	}
	handle := second.Lock(key, "editor:7")
	if handle.Validity() != 0 {
		t.Fatalf("a fresh handle claims validity %v", handle.Validity())
	}
	if err := handle.Refresh(ctx, time.Hour, nil); err != nil {
		t.Fatalf("refresh through a handle: %v", err)
	}
	if handle.Validity() < 59*time.Minute {
		t.Fatalf("validity after refresh = %v", handle.Validity())
	}
	if err := handle.Release(ctx); err != nil {
		t.Fatalf("release through a handle: %v", err)
	}
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("key still exists")
	}
}

func TestReleaseAll(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb := testenv.Redis(t)
	calls := &counter{}
	lc := locker.New(&faultyClient{RedisClient: rdb, calls: calls})
	p := testenv.Prefix(t)

	var locks []*locker.Lock
	for i := range 50 {
		l, err := lc.Obtain(ctx, fmt.Sprintf("%s%d", p, i), time.Minute, &locker.Options{Token: fmt.Sprintf("holder-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		locks = append(locks, l)
	}
	// One of them now belongs to someone else, one is gone already, and one
	// handle names a lock that never existed.
	rdb.Set(ctx, locks[10].Key(), "thief", time.Minute)
	rdb.Del(ctx, locks[20].Key())
	locks = append(locks, lc.Lock(p+"never", "nobody"))

	calls.n.Store(0)
	n, err := lc.ReleaseAll(ctx, locks)
	if err != nil {
		t.Fatalf("release all: %v", err)
	}
	if n != 48 {
		t.Fatalf("released %d, want 48", n)
	}
	if c := calls.n.Load(); c != 1 && c != 2 { // 2 when the script cache was cold
		t.Fatalf("%d round trips, want 1", c)
	}
	for i, l := range locks[:50] {
		got := rdb.Get(ctx, l.Key()).Val()
		if i == 10 && got != "thief" {
			t.Fatalf("another holder's lock was released: %q", got)
		}
		if i != 10 && got != "" {
			t.Fatalf("lock %d still held: %q", i, got)
		}
	}
	if n, err := lc.ReleaseAll(ctx, nil); n != 0 || err != nil {
		t.Fatalf("release all of nothing = %d, %v", n, err)
	}
}

func TestReleaseAllRedlockAndCluster(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, clients, lc := masters(t, 3)
	cc := testenv.Cluster(t)
	for name, lc := range map[string]*locker.Client{"redlock": lc, "cluster": locker.New(cc)} {
		keys := slotKeys(testenv.Prefix(t)+name, 30)
		var locks []*locker.Lock
		for _, k := range keys {
			l, err := lc.Obtain(ctx, k, time.Minute, nil)
			if err != nil {
				t.Fatalf("%s: obtain: %v", name, err)
			}
			locks = append(locks, l)
		}
		if name == "redlock" {
			// Lost on a majority: not held any more, so not released.
			for _, c := range clients[:2] {
				c.Del(ctx, keys[0])
			}
		}
		n, err := lc.ReleaseAll(ctx, locks)
		want := 30
		if name == "redlock" {
			want = 29
		}
		if err != nil || n != want {
			t.Fatalf("%s: release all = %d, %v; want %d", name, n, err, want)
		}
		for _, l := range locks {
			if ttl, err := l.TTL(ctx); err != nil || ttl != 0 {
				t.Fatalf("%s: %q still held (%v, %v)", name, l.Key(), ttl, err)
			}
		}
	}
}
