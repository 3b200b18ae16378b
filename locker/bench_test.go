package locker_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/locker"
)

// BenchmarkObtainRelease measures Obtain+Release pairs on distinct keys, on
// one Redis server and on a 3-master Redlock, one goroutine at a time and
// with GOMAXPROCS*8 goroutines (-cpu to change).
func BenchmarkObtainRelease(b *testing.B) {
	masters := testenv.RedlockMasters(b, 3)
	// A node timeout past the default 50ms: on a loaded machine a slow answer
	// would cost the quorum and fail the pair, and this measures pairs, not
	// outages.
	redlock, err := locker.NewRedlock([]locker.RedisClient{masters[0], masters[1], masters[2]},
		&locker.RedlockOptions{NodeTimeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		lc   *locker.Client
	}{
		{"single", locker.New(testenv.Redis(b))},
		{"redlock3", redlock},
	} {
		b.Run(bc.name+"/serial", func(b *testing.B) {
			prefix := testenv.Prefix(b)
			ctx := context.Background()
			i := 0
			for b.Loop() {
				i++
				obtainRelease(ctx, b, bc.lc, prefix+strconv.Itoa(i))
			}
		})
		b.Run(bc.name+"/parallel", func(b *testing.B) {
			prefix := testenv.Prefix(b)
			ctx := context.Background()
			var seq atomic.Int64
			b.SetParallelism(8)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					obtainRelease(ctx, b, bc.lc, prefix+strconv.FormatInt(seq.Add(1), 10))
				}
			})
		})
	}
}

func obtainRelease(ctx context.Context, b *testing.B, lc *locker.Client, key string) {
	lock, err := lc.Obtain(ctx, key, 10*time.Second, nil)
	if err != nil {
		b.Error(err)
		return
	}
	if err := lock.Release(ctx); err != nil {
		b.Error(err)
	}
}

// BenchmarkObtainAny measures one claim-path step: a batch of 16 candidate
// keys, the first half taken, on a single server.
func BenchmarkObtainAny(b *testing.B) {
	ctx := context.Background()
	rdb := testenv.Redis(b)
	lc := locker.New(rdb)
	prefix := testenv.Prefix(b)
	keys := make([]string, 16)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
		if i < 8 {
			rdb.Set(ctx, keys[i], "other", time.Minute)
		}
	}
	for b.Loop() {
		lock, err := lc.ObtainAny(ctx, keys, 10*time.Second, nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := lock.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
