package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// fakeReads serves candidate reads from a list per category, best first,
// and counts them.
type fakeReads struct {
	mu    sync.Mutex
	cats  map[string][]tasks.Candidate
	reads atomic.Int64
	gate  chan struct{} // when set, each read waits for it
	err   error
	// limits are the limits of the reads, in order.
	limits []int
}

func (f *fakeReads) read(ctx context.Context, cat string, limit, _ int) ([]tasks.Candidate, error) {
	f.reads.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limits = append(f.limits, limit)
	if f.err != nil {
		return nil, f.err
	}
	cs := f.cats[cat]
	return slices.Clone(cs[:min(limit, len(cs))]), nil
}

func cands(prio int, ids ...int64) []tasks.Candidate {
	out := make([]tasks.Candidate, len(ids))
	for i, id := range ids {
		out[i] = tasks.Candidate{ID: id, Priority: prio, Status: tasks.StatusPending}
	}
	return out
}

func pooledIDs(ps []pooled) []int64 {
	out := make([]int64, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

func TestCandidatePoolHandsOutDistinctCandidatesInOrder(t *testing.T) {
	f := &fakeReads{cats: map[string][]tasks.Candidate{
		"news":  cands(1, 5, 6, 7, 8, 9, 10, 11, 12),
		"sport": append(cands(3, 20), cands(0, 21)...),
	}}
	p := newCandidatePool(8, f.read)
	ctx := context.Background()

	// Across categories: priority first, then id.
	got, err := p.take(ctx, []string{"news", "sport"}, 1, nil)
	if err != nil || !slices.Equal(pooledIDs(got), []int64{20}) {
		t.Fatalf("take = %v, %v; want [20] (highest priority)", pooledIDs(got), err)
	}
	var seen []int64
	for range 8 {
		got, err := p.take(ctx, []string{"news", "sport"}, 1, nil)
		if err != nil || len(got) != 1 {
			t.Fatalf("take = %v, %v", pooledIDs(got), err)
		}
		seen = append(seen, got[0].ID)
	}
	if want := []int64{5, 6, 7, 8, 9, 10, 11, 12}; !slices.Equal(seen, want) {
		t.Errorf("handed out %v, want %v: distinct, best first", seen, want)
	}
	if n := f.reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2 (one per category)", n)
	}
}

func TestCandidatePoolTakesSeveralOnlyWhilePlentyAreLeft(t *testing.T) {
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3, 4, 5, 6, 7, 8)}}
	p := newCandidatePool(8, f.read)
	got, _ := p.take(context.Background(), []string{"news"}, 2, nil)
	if !slices.Equal(pooledIDs(got), []int64{1, 2}) {
		t.Errorf("take 2 of 8 = %v, want [1 2]", pooledIDs(got))
	}
	for range 4 {
		p.take(context.Background(), []string{"news"}, 1, nil)
	}
	got, _ = p.take(context.Background(), []string{"news"}, 2, nil)
	if len(got) != 1 {
		t.Errorf("take 2 of the last 2 = %v, want only 1: the other is for a concurrent claim", pooledIDs(got))
	}
}

func TestCandidatePoolLeavesOutSkippedAndInFlight(t *testing.T) {
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3)}}
	p := newCandidatePool(8, f.read)
	ctx := context.Background()
	first, _ := p.take(ctx, []string{"news"}, 1, nil)
	got, _ := p.take(ctx, []string{"news"}, 1, map[int64]bool{2: true})
	if !slices.Equal(pooledIDs(got), []int64{3}) {
		t.Fatalf("take skipping 2 = %v, want [3]", pooledIDs(got))
	}
	// A fresh read still shows 1 and 3 as claimable (their claims are in
	// flight), and 2: only 2 is handed out.
	p.invalidate("news")
	got, _ = p.take(ctx, []string{"news"}, 1, nil)
	if !slices.Equal(pooledIDs(got), []int64{2}) {
		t.Fatalf("take after a re-read = %v, want [2]: 1 and 3 are in flight", pooledIDs(got))
	}
	// 3 comes back untried, and 1 is claimed while a read is in flight:
	// that read leaves 1 out, a read that starts after the claim does not.
	p.done([]pooled{{Candidate: tasks.Candidate{ID: 3}, category: "news"}}, nil, nil)
	f.gate = make(chan struct{})
	p.invalidate("news")
	taken := make(chan []pooled)
	go func() {
		got, _ := p.take(ctx, []string{"news"}, 1, map[int64]bool{2: true})
		taken <- got
	}()
	testenv.Eventually(t, 10*time.Second, "the take's read in flight", func() bool { return f.reads.Load() >= 3 })
	p.done(first, []int64{first[0].ID}, nil)
	close(f.gate)
	if got := <-taken; !slices.Equal(pooledIDs(got), []int64{3}) {
		t.Errorf("take with a read older than the claim = %v, want [3]", pooledIDs(got))
	}
	f.gate = nil
	p.invalidate("news")
	got, _ = p.take(ctx, []string{"news"}, 1, nil)
	if !slices.Equal(pooledIDs(got), []int64{1}) {
		t.Errorf("take with a read newer than the claim = %v, want [1]: claimable again (say, its lease passed)", pooledIDs(got))
	}
}

func TestCandidatePoolGivesBackUntriedCandidates(t *testing.T) {
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3, 4, 5, 6, 7, 8)}}
	p := newCandidatePool(8, f.read)
	ctx := context.Background()
	got, _ := p.take(ctx, []string{"news"}, 2, nil)
	p.done(got, nil, got[1:]) // 1 was refused, 2 untried
	again, _ := p.take(ctx, []string{"news"}, 1, nil)
	if !slices.Equal(pooledIDs(again), []int64{2}) {
		t.Errorf("take = %v, want [2] back in its place", pooledIDs(again))
	}
	// Given back after the category was read again (tasks arrived): the
	// read left it out only because it was in flight, so it goes back in,
	// in its place, and wakes nobody for a read.
	got, _ = p.take(ctx, []string{"news"}, 1, nil)
	p.invalidate("news")
	reads := f.reads.Load()
	p.take(ctx, []string{"news"}, 1, nil) // re-reads
	if f.reads.Load() != reads+1 {
		t.Fatalf("reads = %d, want %d: the take after an invalidation reads", f.reads.Load(), reads+1)
	}
	put, missed := p.done(got, nil, got)
	if put["news"] != 1 || len(missed) != 0 {
		t.Errorf("given back after a read: put %v, missed %v, want 1 put", put, missed)
	}
	if i := slices.IndexFunc(p.cats["news"].cands, func(c tasks.Candidate) bool { return c.ID == got[0].ID }); i != 0 {
		t.Errorf("candidate %d at %d of the newer read, want 0 (it is the best)", got[0].ID, i)
	}
}

func TestCandidatePoolLeavesOutGivenBackAfterARecheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after func(p *candidatePool)
	}{
		{"stale", func(p *candidatePool) { p.stale("news") }},
		{"paused", func(p *candidatePool) { p.paused("news") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3, 4, 5, 6, 7, 8)}}
			p := newCandidatePool(8, f.read)
			ctx := context.Background()
			got, _ := p.take(ctx, []string{"news"}, 1, nil)
			tc.after(p)
			p.take(ctx, []string{"news"}, 1, nil) // re-reads, to decide afresh
			put, missed := p.done(got, nil, got)
			if missed["news"] != 1 || len(put) != 0 {
				t.Errorf("given back after a %s read: put %v, missed %v, want 1 missed", tc.name, put, missed)
			}
			if slices.ContainsFunc(p.cats["news"].cands, func(c tasks.Candidate) bool { return c.ID == got[0].ID }) {
				t.Errorf("candidate %d given back into the read made after it was found %s", got[0].ID, tc.name)
			}
			// Taken after that read, given back after an ordinary one: back in.
			got, _ = p.take(ctx, []string{"news"}, 1, nil)
			p.invalidate("news")
			p.take(ctx, []string{"news"}, 1, nil)
			if put, _ := p.done(got, nil, got); put["news"] != 1 {
				t.Errorf("given back after an ordinary read that followed the %s one: put %v, want 1", tc.name, put)
			}
		})
	}
}

func TestCandidatePoolReadsOnceForConcurrentClaims(t *testing.T) {
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3, 4, 5, 6, 7, 8)}, gate: make(chan struct{})}
	p := newCandidatePool(8, f.read)
	const claims = 6
	var wg sync.WaitGroup
	results := make([][]pooled, claims)
	for i := range claims {
		wg.Go(func() {
			got, err := p.take(context.Background(), []string{"news"}, 1, nil)
			if err != nil {
				t.Error(err)
			}
			results[i] = got
		})
	}
	// Release the read only once every other claim waits for it, so that the
	// check below tests that they did not read too.
	testenv.Eventually(t, 10*time.Second, "one read, and the other claims waiting for it", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		cc := p.cats["news"]
		return cc != nil && cc.waiting == claims-1 && f.reads.Load() == 1
	})
	close(f.gate)
	wg.Wait()
	var ids []int64
	for _, r := range results {
		ids = append(ids, pooledIDs(r)...)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []int64{1, 2, 3, 4, 5, 6}) {
		t.Errorf("handed out %v, want 1..6 once each", ids)
	}
	if n := f.reads.Load(); n != 1 {
		t.Errorf("%d reads for %d concurrent claims, want 1", n, claims)
	}
}

func TestCandidatePoolReadsAgainWhenABatchRunsOut(t *testing.T) {
	// A full batch may have left more unread: a claim that finds it taken
	// reads again rather than give up.
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3, 4, 5)}}
	p := newCandidatePool(2, f.read)
	ctx := context.Background()
	var got []int64
	for range 5 {
		ps, err := p.take(ctx, []string{"news"}, 1, nil)
		if err != nil || len(ps) != 1 {
			t.Fatalf("take = %v, %v", pooledIDs(ps), err)
		}
		got = append(got, ps[0].ID)
		p.done(ps, []int64{ps[0].ID}, nil)
		f.mu.Lock()
		f.cats["news"] = slices.DeleteFunc(f.cats["news"], func(c tasks.Candidate) bool { return c.ID == ps[0].ID })
		f.mu.Unlock()
	}
	if !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Errorf("handed out %v, want 1..5", got)
	}
	if ps, _ := p.take(ctx, []string{"news"}, 1, nil); len(ps) != 0 {
		t.Errorf("take from an empty category = %v", pooledIDs(ps))
	}
}

func TestCandidatePoolReadsPastCandidatesInFlight(t *testing.T) {
	// Claims in flight hold the best candidates, which still read as
	// claimable: a new read must reach past them.
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3, 4, 5)}}
	p := newCandidatePool(2, f.read)
	ctx := context.Background()
	for range 2 {
		if ps, _ := p.take(ctx, []string{"news"}, 1, nil); len(ps) != 1 {
			t.Fatalf("take = %v", pooledIDs(ps))
		}
	}
	p.invalidate("news")
	ps, err := p.take(ctx, []string{"news"}, 1, nil)
	if err != nil || !slices.Equal(pooledIDs(ps), []int64{3}) {
		t.Errorf("take with 1 and 2 in flight = %v, %v; want [3]", pooledIDs(ps), err)
	}
}

func TestCandidatePoolSpreadsOverAContendedCategory(t *testing.T) {
	// Oldest first while no other process competes; once one does, one of
	// the oldest few of the best priority, never a lower priority.
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": append(cands(2, 1, 2, 3), cands(1, 4, 5)...)}}
	p := newCandidatePool(16, f.read)
	ctx := context.Background()
	for range 20 {
		ps, _ := p.take(ctx, []string{"news"}, 1, nil)
		if ps[0].ID != 1 {
			t.Fatalf("uncontended take = %d, want 1 (oldest)", ps[0].ID)
		}
		p.done(ps, nil, ps)
	}
	p.contended("news")
	seen := make(map[int64]int)
	for range 200 {
		ps, _ := p.take(ctx, []string{"news"}, 1, nil)
		seen[ps[0].ID]++
		p.done(ps, nil, ps)
	}
	if seen[4] != 0 || seen[5] != 0 {
		t.Errorf("contended takes %v reached priority 1 while priority 2 had candidates", seen)
	}
	if len(seen) < 2 {
		t.Errorf("contended takes %v all tried the same candidate", seen)
	}
}

func TestCandidatePoolReadsPastSkippedCandidates(t *testing.T) {
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3, 4, 5)}}
	p := newCandidatePool(2, f.read)
	ps, err := p.take(context.Background(), []string{"news"}, 1, map[int64]bool{1: true, 2: true})
	if err != nil || !slices.Equal(pooledIDs(ps), []int64{3}) {
		t.Errorf("take skipping the first two = %v, %v; want [3]", pooledIDs(ps), err)
	}
}

func TestCandidatePoolReportsReadErrors(t *testing.T) {
	boom := errors.New("boom")
	f := &fakeReads{err: boom}
	p := newCandidatePool(8, f.read)
	if _, err := p.take(context.Background(), []string{"news"}, 1, nil); !errors.Is(err, boom) {
		t.Errorf("take = %v, want the read's error", err)
	}
}

// After a refused claim the category is read again from the primary, once;
// the read after that goes to the replica again.
func TestCandidatePoolStaleReadsThePrimaryOnce(t *testing.T) {
	replica := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 1, 2, 3)}}
	primary := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, 7, 8, 9)}}
	p := newCandidatePool(8, replica.read)
	p.readPrimary = primary.read
	ctx := context.Background()
	got, _ := p.take(ctx, []string{"news"}, 1, nil)
	if !slices.Equal(pooledIDs(got), []int64{1}) || replica.reads.Load() != 1 || primary.reads.Load() != 0 {
		t.Fatalf("first take = %v after %d replica and %d primary reads, want [1] from the replica",
			pooledIDs(got), replica.reads.Load(), primary.reads.Load())
	}
	p.done(got, nil, nil)
	p.stale("news")
	got, _ = p.take(ctx, []string{"news"}, 1, nil)
	if !slices.Equal(pooledIDs(got), []int64{7}) || primary.reads.Load() != 1 {
		t.Fatalf("take after stale = %v after %d primary reads, want [7] from the primary", pooledIDs(got), primary.reads.Load())
	}
	p.invalidate("news")
	p.take(ctx, []string{"news"}, 1, nil)
	if replica.reads.Load() != 2 || primary.reads.Load() != 1 {
		t.Fatalf("reads after invalidate: replica %d, primary %d; want the replica again", replica.reads.Load(), primary.reads.Load())
	}
}

// A claim waiting for another's read is not failed by the end of the
// reader's request: it reads itself.
func TestCandidatePoolReadsAgainWhenTheReaderLeaves(t *testing.T) {
	var reads atomic.Int64
	reading := make(chan struct{})
	read := func(ctx context.Context, _ string, _, _ int) ([]tasks.Candidate, error) {
		if reads.Add(1) == 1 {
			close(reading)
			<-ctx.Done()
			return nil, fmt.Errorf("candidates: %w", ctx.Err())
		}
		return cands(0, 1, 2), nil
	}
	p := newCandidatePool(8, read)
	readerCtx, leave := context.WithCancel(context.Background())
	readerErr := make(chan error, 1)
	go func() {
		_, err := p.take(readerCtx, []string{"news"}, 1, nil)
		readerErr <- err
	}()
	<-reading
	waiter := takeBehindRead(t, p)
	leave()
	if err := <-readerErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the reader: %v, want context.Canceled", err)
	}
	r := <-waiter
	if r.err != nil || !slices.Equal(pooledIDs(r.got), []int64{1}) {
		t.Errorf("the waiting claim: %v, %v; want candidate 1", pooledIDs(r.got), r.err)
	}
	if n := reads.Load(); n != 2 {
		t.Errorf("%d reads, want 2", n)
	}
}

func TestCandidatePoolTakeManyReadsAWholeBatch(t *testing.T) {
	// A worker's batch wants more candidates than one read of the pool's
	// size holds: one read of the batch's size serves it, and a batch that
	// finds fewer than it wants in store while more may be unread reads
	// again rather than go out short.
	ids := make([]int64, 30)
	for i := range ids {
		ids[i] = int64(i + 1)
	}
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, ids...)}}
	p := newCandidatePool(4, f.read)
	ctx := context.Background()
	got, err := p.takeMany(ctx, []string{"news"}, 10, nil)
	if err != nil || !slices.Equal(pooledIDs(got), ids[:10]) {
		t.Fatalf("takeMany 10 = %v, %v; want 1..10", pooledIDs(got), err)
	}
	if n := f.reads.Load(); n != 1 {
		t.Errorf("%d reads for a batch of 10 with a pool of 4, want 1", n)
	}
	p.done(got, pooledIDs(got), nil)
	f.mu.Lock()
	f.cats["news"] = f.cats["news"][10:]
	f.mu.Unlock()

	// 4 are left in store; a batch of 10 reads again and gets all 10.
	got, err = p.takeMany(ctx, []string{"news"}, 10, nil)
	if err != nil || !slices.Equal(pooledIDs(got), ids[10:20]) {
		t.Fatalf("takeMany 10 again = %v, %v; want 11..20", pooledIDs(got), err)
	}
	if n := f.reads.Load(); n != 2 {
		t.Errorf("%d reads after the second batch, want 2", n)
	}

	// The store has fewer than a batch: one read, and what it has is handed
	// out.
	p.done(got, pooledIDs(got), nil)
	f.mu.Lock()
	f.cats["news"] = f.cats["news"][10:]
	f.mu.Unlock()
	got, _ = p.takeMany(ctx, []string{"news"}, 25, nil)
	if !slices.Equal(pooledIDs(got), ids[20:]) {
		t.Fatalf("takeMany 25 of 10 = %v, want 21..30", pooledIDs(got))
	}
	if n := f.reads.Load(); n != 3 {
		t.Errorf("%d reads after the third batch, want 3", n)
	}
}

// takeResult is what a take answered.
type takeResult struct {
	got []pooled
	err error
}

// takeBehindRead starts a take of one "news" candidate while a read of the
// category is in flight, and returns once the take waits for that read; the
// take's answer arrives on the channel.
func takeBehindRead(t *testing.T, p *candidatePool) <-chan takeResult {
	t.Helper()
	waiter := make(chan takeResult, 1)
	go func() {
		got, err := p.take(context.Background(), []string{"news"}, 1, nil)
		waiter <- takeResult{got, err}
	}()
	testenv.Eventually(t, 10*time.Second, "the second claim waiting for the read", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.cats["news"].waiting == 1
	})
	return waiter
}

// Claims that waited for a read are the demand the next read serves: it
// reads for all of them at once, not a Batch.
func TestCandidatePoolSizesAReadByTheClaimsThatWaited(t *testing.T) {
	var ids []int64
	for i := range 40 {
		ids = append(ids, int64(i+1))
	}
	f := &fakeReads{cats: map[string][]tasks.Candidate{"news": cands(0, ids...)}, gate: make(chan struct{})}
	p := newCandidatePool(2, f.read)
	const claims = 6
	var wg sync.WaitGroup
	for range claims {
		wg.Go(func() {
			if _, err := p.take(context.Background(), []string{"news"}, 1, nil); err != nil {
				t.Error(err)
			}
		})
	}
	testenv.Eventually(t, 10*time.Second, "the other claims waiting for the read", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		cc := p.cats["news"]
		return cc != nil && cc.waiting == claims-1
	})
	close(f.gate)
	wg.Wait()
	p.invalidate("news")
	if _, err := p.take(context.Background(), []string{"news"}, 1, nil); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.limits) < 2 {
		t.Fatalf("reads %v, want at least 2", f.limits)
	}
	if got, want := f.limits[len(f.limits)-1], (claims-1)*candidatePerWaiter; got < want {
		t.Errorf("the read after %d claims waited read %d candidates, want at least %d (reads: %v)", claims-1, got, want, f.limits)
	}
}
