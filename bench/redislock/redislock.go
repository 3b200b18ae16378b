// Package redislock measures taskd's locker against github.com/bsm/redislock:
// Obtain+Release pairs per second on distinct keys, on the same Redis, with
// the same client options, time to live and default lock options (random
// token, no retry).
//
// It is a nested module so that the main module does not depend on
// bsm/redislock. The Go benchmarks are in compare_test.go; cmd/compare runs
// both lockers side by side, interleaved, and prints their ratio.
package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	bsmlock "github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/locker"
)

const (
	// TTL is the time to live of every lock taken by the benchmark. No lock
	// lives that long: each is released at once.
	TTL = 10 * time.Second

	// PoolSizeDefault is the go-redis connection pool size for both lockers,
	// more than the 50 goroutines of the parallel mode so that neither waits
	// for a connection.
	PoolSizeDefault = 64
)

// NewRedis returns a client for the Redis at url (redis://host:port/db) with
// the options both lockers share: PoolSizeDefault connections, the rest
// go-redis defaults.
func NewRedis(url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("parse redis url: %w", err)
	}
	opt.PoolSize = PoolSizeDefault
	return redis.NewClient(opt), nil
}

// Pair obtains the lock key and releases it again. It fails when either step
// does: on distinct keys no lock is ever busy.
type Pair func(ctx context.Context, key string) error

// Subject is one locker under test.
type Subject struct {
	Name string // "taskd" or "bsm"
	Pair Pair
}

// Subjects returns taskd's locker and bsm/redislock over rdb, in that order,
// both with default options.
func Subjects(rdb *redis.Client) []Subject {
	return []Subject{{"taskd", Taskd(rdb)}, {"bsm", BSM(rdb)}}
}

// Taskd returns a Pair that uses taskd's locker over rdb.
func Taskd(rdb *redis.Client) Pair {
	lc := locker.New(rdb)
	return func(ctx context.Context, key string) error {
		lock, err := lc.Obtain(ctx, key, TTL, nil)
		if err != nil {
			return fmt.Errorf("taskd obtain %q: %w", key, err)
		}
		if err := lock.Release(ctx); err != nil {
			return fmt.Errorf("taskd release %q: %w", key, err)
		}
		return nil
	}
}

// BSM returns a Pair that uses github.com/bsm/redislock over rdb.
func BSM(rdb *redis.Client) Pair {
	lc := bsmlock.New(rdb)
	return func(ctx context.Context, key string) error {
		lock, err := lc.Obtain(ctx, key, TTL, nil)
		if err != nil {
			return fmt.Errorf("bsm obtain %q: %w", key, err)
		}
		if err := lock.Release(ctx); err != nil {
			return fmt.Errorf("bsm release %q: %w", key, err)
		}
		return nil
	}
}

// Prefix returns a key prefix unique to this run and name, so that runs
// sharing a server never touch each other's keys.
func Prefix(name string) string {
	return "bench:redislock:" + rand.Text()[:8] + ":" + name + ":"
}

// Load says how Run drives a Pair.
type Load struct {
	// Goroutines run pairs concurrently. Default: 1.
	Goroutines int
	// N stops the run after N pairs in all. Default: no limit.
	N int64
	// Duration stops the run once this much time has passed; pairs under
	// way finish. Default: no limit.
	Duration time.Duration
}

// Run calls pair on keys prefix+"1", prefix+"2", ... from load.Goroutines
// goroutines until load.N pairs were started or load.Duration has passed,
// and returns how many pairs completed and the time from start until the last
// one finished. The first error stops the run and is returned.
func Run(ctx context.Context, pair Pair, prefix string, load Load) (int64, time.Duration, error) {
	if load.N <= 0 && load.Duration <= 0 {
		return 0, 0, errors.New("run: neither N nor Duration set")
	}
	var (
		seq, done atomic.Int64
		stop      atomic.Bool
		errOnce   sync.Once
		firstErr  error
		wg        sync.WaitGroup
		start     = time.Now()
		deadline  time.Time
	)
	if load.Duration > 0 {
		deadline = start.Add(load.Duration)
	}
	for range max(load.Goroutines, 1) {
		wg.Go(func() {
			for !stop.Load() {
				i := seq.Add(1)
				if load.N > 0 && i > load.N || !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				if err := pair(ctx, prefix+strconv.FormatInt(i, 10)); err != nil {
					errOnce.Do(func() { firstErr = err })
					stop.Store(true)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return done.Load(), time.Since(start), firstErr
}
