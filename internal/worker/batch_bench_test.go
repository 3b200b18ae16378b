package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// batchCounter is a store that counts the batches of the worker's writes and
// their members.
type batchCounter struct {
	*store.Store
	claims, claimed, completes, completed, heartbeats, renewed atomic.Int64
}

func (s *batchCounter) ClaimBatch(ctx context.Context, ps []tasks.ClaimParams) ([]tasks.ClaimResult, error) {
	s.claims.Add(1)
	s.claimed.Add(int64(len(ps)))
	return s.Store.ClaimBatch(ctx, ps)
}

func (s *batchCounter) Complete(ctx context.Context, os []tasks.Outcome) ([]tasks.Completed, error) {
	s.completes.Add(1)
	s.completed.Add(int64(len(os)))
	return s.Store.Complete(ctx, os)
}

func (s *batchCounter) HeartbeatBatch(ctx context.Context, ps []tasks.HeartbeatParams) ([]tasks.Renewed, error) {
	s.heartbeats.Add(1)
	s.renewed.Add(int64(len(ps)))
	return s.Store.HeartbeatBatch(ctx, ps)
}

// BenchmarkWorkerBurnDown burns down b.N pre-inserted tasks with a no-op
// handler, and reports jobs/s and the mean sizes of the claim and completion
// batches.
func BenchmarkWorkerBurnDown(b *testing.B) {
	for _, slots := range []int{16, 100} {
		b.Run(fmt.Sprintf("slots=%d", slots), func(b *testing.B) {
			bu := setup(b)
			store := &batchCounter{Store: bu.Store}
			d, err := dispatcher.New(store, bu.Locks, dispatcher.Config{KeyPrefix: bu.Prefix})
			if err != nil {
				b.Fatal(err)
			}
			bu.Add(b, "jobs", 0, b.N)
			w, err := worker.New(d, worker.Config{
				Concurrency: slots, Wait: time.Second, Logger: slog.New(slog.DiscardHandler),
				Handler: worker.HandlerFunc(func(context.Context, *tasks.Task) (any, error) {
					return map[string]bool{"ok": true}, nil
				}),
				Categories: []string{"jobs"},
			})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			if err := w.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			testenv.Eventually(b, 10*time.Minute, "all tasks processed", func() bool { return w.Totals().Processed >= int64(b.N) })
			elapsed := time.Since(start)
			b.StopTimer()
			if err := w.Stop(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "jobs/s")
			if n := store.claims.Load(); n > 0 {
				b.ReportMetric(float64(store.claimed.Load())/float64(n), "claimed/batch")
			}
			if n := store.completes.Load(); n > 0 {
				b.ReportMetric(float64(store.completed.Load())/float64(n), "completed/batch")
			}
		})
	}
}
