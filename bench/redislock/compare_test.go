package redislock_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/bench/redislock"
)

// The same variables as taskd's internal/testenv, which another module may
// not import.
const (
	redisURLVar        = "TASKD_TEST_REDIS_URL"
	requireServicesVar = "TASKD_TEST_REQUIRE_SERVICES"
)

// parallelGoroutines is the concurrency of the parallel mode.
const parallelGoroutines = 50

// newRedis returns a client for the Redis at TASKD_TEST_REDIS_URL. It skips
// the test when the variable is unset, or fails it under
// TASKD_TEST_REQUIRE_SERVICES=1.
func newRedis(t testing.TB) *redis.Client {
	t.Helper()
	url := os.Getenv(redisURLVar)
	if url == "" {
		if os.Getenv(requireServicesVar) == "1" {
			t.Fatalf("%s is not set but %s=1: start the services with `scripts/services.sh up`", redisURLVar, requireServicesVar)
		}
		t.Skipf("%s is not set: run `scripts/services.sh up` and eval `scripts/services.sh env`", redisURLVar)
	}
	rdb, err := redislock.NewRedis(url)
	if err != nil {
		t.Fatalf("%s: %v", redisURLVar, err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	if err := rdb.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("redis %s: %v", rdb.Options().Addr, err)
	}
	return rdb
}

func prefix(t testing.TB) string {
	return redislock.Prefix(strings.ReplaceAll(t.Name(), "/", ":"))
}

// BenchmarkObtainRelease measures Obtain+Release pairs on distinct keys with
// taskd's locker and with bsm/redislock, one goroutine at a time and with 50
// goroutines. Each subject gets its own client with the same options.
func BenchmarkObtainRelease(b *testing.B) {
	for _, name := range []string{"taskd", "bsm"} {
		b.Run(name, func(b *testing.B) {
			pair := subject(b, name)
			b.Run("serial", func(b *testing.B) {
				ctx, keys := context.Background(), prefix(b)
				n := int64(0)
				for b.Loop() {
					n++
					if err := pair(ctx, keys+strconv.FormatInt(n, 10)); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			})
			b.Run("parallel50", func(b *testing.B) {
				ctx, keys := context.Background(), prefix(b)
				b.ResetTimer()
				_, _, err := redislock.Run(ctx, pair, keys, redislock.Load{Goroutines: parallelGoroutines, N: int64(b.N)})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			})
		})
	}
}

func subject(t testing.TB, name string) redislock.Pair {
	rdb := newRedis(t)
	for _, s := range redislock.Subjects(rdb) {
		if s.Name == name {
			return s.Pair
		}
	}
	t.Fatalf("no subject %q", name)
	return nil
}

// TestPairs checks that each subject really takes and gives back a lock: it
// fails on a key someone else holds, and leaves a free key free.
func TestPairs(t *testing.T) {
	rdb := newRedis(t)
	ctx := context.Background()
	for _, s := range redislock.Subjects(rdb) {
		t.Run(s.Name, func(t *testing.T) {
			keys := prefix(t)
			free, held := keys+"free", keys+"held"
			if err := s.Pair(ctx, free); err != nil {
				t.Fatalf("pair on a free key: %v", err)
			}
			if n, err := rdb.Exists(ctx, free).Result(); err != nil || n != 0 {
				t.Errorf("after a pair, EXISTS %s = %d, %v; want 0, nil", free, n, err)
			}
			if err := rdb.Set(ctx, held, "someone else", redislock.TTL).Err(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rdb.Del(context.Background(), held) })
			if err := s.Pair(ctx, held); err == nil {
				t.Errorf("pair on a held key succeeded")
			}
			if v, err := rdb.Get(ctx, held).Result(); err != nil || v != "someone else" {
				t.Errorf("held key = %q, %v after a failed pair; want it untouched", v, err)
			}
		})
	}
}

// TestRun checks that Run stops after N pairs and reports the first error.
func TestRun(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int64
	n, _, err := redislock.Run(ctx, func(context.Context, string) error { calls.Add(1); return nil }, "k", redislock.Load{Goroutines: 7, N: 1000})
	if err != nil || n != 1000 || calls.Load() != 1000 {
		t.Errorf("Run N=1000: done %d, calls %d, err %v; want 1000, 1000, nil", n, calls.Load(), err)
	}

	boom := errors.New("boom")
	n, _, err = redislock.Run(ctx, func(_ context.Context, key string) error {
		if key == "k10" {
			return boom
		}
		return nil
	}, "k", redislock.Load{Goroutines: 1, N: 1000})
	if !errors.Is(err, boom) || n != 9 {
		t.Errorf("Run failing at k10: done %d, err %v; want 9, boom", n, err)
	}
}
