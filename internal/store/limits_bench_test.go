package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// Limits benchmark: workers claiming and completing in batches, as the
// worker runtime does, with no limit, with a category limit equal to their
// slots, and with 100 limit keys of limit 1.
const (
	limitBenchWorkers = 4
	limitBenchSlots   = 8 // per worker
	limitBenchTasks   = 3000
)

// LimitBenchCase is one case of BenchmarkClaimLimits: the category's
// workflow and the number of limit keys its tasks spread over (0: none).
type limitBenchCase struct {
	name string
	wf   tasks.Workflow
	keys int
}

var limitBenchCases = []limitBenchCase{
	{"unlimited", tasks.Workflow{}, 0},
	{"limit=slots", tasks.Workflow{MaxInFlight: limitBenchWorkers * limitBenchSlots}, 0},
	{"100keys_limit1", tasks.Workflow{KeyLimit: 1}, 100},
}

// BenchmarkClaimLimits reports the jobs per second of each case and its
// ratio to the unlimited case of the same run, averaged over the
// iterations (each runs every case on limitBenchTasks tasks: -benchtime=3x
// runs each three times, interleaved).
func BenchmarkClaimLimits(b *testing.B) {
	rates := map[string]float64{}
	for range b.N {
		for _, c := range limitBenchCases {
			rates[c.name] += runLimitBench(b, c) / float64(b.N)
		}
	}
	for _, c := range limitBenchCases {
		b.ReportMetric(rates[c.name], c.name+"_jobs/s")
		if c.name != "unlimited" {
			b.ReportMetric(rates[c.name]/rates["unlimited"], c.name+"_ratio")
		}
	}
}

// runLimitBench runs case c on a new database and returns its jobs per
// second.
func runLimitBench(b *testing.B, c limitBenchCase) float64 {
	b.Helper()
	b.StopTimer()
	s := setup(b, store.Config{Workflows: map[string]tasks.Workflow{"bench": c.wf}})
	nts := make([]tasks.NewTask, limitBenchTasks)
	for i := range nts {
		nts[i] = tasks.NewTask{Category: "bench", Title: "t"}
		if c.keys > 0 {
			nts[i].LimitKey = fmt.Sprintf("key-%d", i%c.keys)
		}
	}
	s.insert(b, nts...)
	b.StartTimer()
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for g := range limitBenchWorkers {
		wg.Go(func() {
			if err := limitBenchWorker(s.ctx, s.store, g); err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	if n := s.count(b, `SELECT COUNT(*) FROM tasks WHERE status <> 'done'`); n != 0 {
		b.Fatalf("%s: %d tasks not done", c.name, n)
	}
	return float64(limitBenchTasks) / elapsed.Seconds()
}

// limitBenchWorker claims up to limitBenchSlots tasks at a time (those of
// the candidates its number picks, so that workers rarely race for one) and
// completes them, until nothing is left.
func limitBenchWorker(ctx context.Context, s *store.Store, g int) error {
	holder := fmt.Sprintf("bench-%d", g)
	for empty := 0; empty < 20; {
		cands, err := s.Candidates(ctx, tasks.CandidatesParams{Categories: []string{"bench"}, Limit: 64, Primary: true})
		if err != nil {
			return err
		}
		var ps []tasks.ClaimParams
		for _, cd := range cands {
			if int(cd.ID)%limitBenchWorkers == g && cd.Status == tasks.StatusPending && len(ps) < limitBenchSlots {
				ps = append(ps, tasks.ClaimParams{TaskID: cd.ID, Fence: cd.Fence, Status: cd.Status, Holder: holder, Lease: time.Minute, Category: "bench", LimitKey: cd.LimitKey})
			}
		}
		if len(ps) == 0 {
			if len(cands) == 0 {
				empty++
			}
			time.Sleep(time.Millisecond)
			continue
		}
		empty = 0
		res, err := s.ClaimBatch(ctx, ps)
		if err != nil {
			return err
		}
		var os []tasks.Outcome
		for _, r := range res {
			if r.Err == nil {
				os = append(os, tasks.Outcome{TaskID: r.Claim.Task.ID, Fence: r.Claim.Fence, Holder: holder, Result: json.RawMessage(`{}`)})
			}
		}
		if len(os) == 0 {
			continue
		}
		if _, err := s.Complete(ctx, os); err != nil {
			return err
		}
	}
	return nil
}
