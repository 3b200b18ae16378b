package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// claimed is one claim of a cycle, as the claim returned it.
type claimed struct {
	id       int64
	category string
	priority int
}

// cycle has ed claim and submit up to n times, each submit claiming the
// next task, on ds in turn (one submit on ds[0], the next on ds[1], …), and
// returns the claims in order; the last is left held. It stops early when
// nothing is claimable.
func cycle(t *testing.T, ds []*dispatcher.Dispatcher, ed dispatcher.Claimant, n int) []claimed {
	t.Helper()
	ctx := context.Background()
	var out []claimed
	var c *tasks.Claim
	for i := 0; len(out) < n; i++ {
		d := ds[i%len(ds)]
		var err error
		if c == nil {
			c, err = d.Next(ctx, ed, 0)
			if errors.Is(err, dispatcher.ErrNoTask) {
				return out
			}
			if err != nil {
				t.Fatalf("next: %v", err)
			}
		}
		out = append(out, claimed{c.Task.ID, c.Task.Category, c.Task.Priority})
		if len(out) == n {
			break // the last is left held
		}
		if c, err = d.Submit(ctx, ed, dispatcher.ClaimRef{TaskID: c.Task.ID, Fence: c.Fence}, json.RawMessage(`{}`)); err != nil {
			t.Fatalf("submit: %v", err)
		}
	}
	return out
}

// addMixed adds n tasks of category with priorities 0..4 in turn.
func addMixed(t *testing.T, b *bundle, category string, n int) {
	t.Helper()
	ts := make([]tasks.NewTask, n)
	for i := range ts {
		ts[i] = tasks.NewTask{Category: category, Priority: i % 5, Title: fmt.Sprintf("%s #%d", category, i)}
	}
	if _, err := b.D.AddTasks(context.Background(), ts); err != nil {
		t.Fatalf("add tasks: %v", err)
	}
}

// checkShares fails t unless each category's share of got is within 2
// points of its weight's share of weights.
func checkShares(t *testing.T, got []claimed, weights map[string]int) {
	t.Helper()
	total := 0
	for _, w := range weights {
		total += w
	}
	counts := map[string]int{}
	for _, c := range got {
		counts[c.category]++
	}
	for cat, w := range weights {
		want := float64(w) / float64(total)
		share := float64(counts[cat]) / float64(len(got))
		t.Logf("category %s: %d of %d claims, share %.4f for %.4f (%+.2f points)", cat, counts[cat], len(got), share, want, 100*(share-want))
		if math.Abs(share-want) > 0.02 {
			t.Errorf("category %s got %d of %d claims (%.3f), want a share of %.3f: counts %v",
				cat, counts[cat], len(got), share, want, counts)
		}
	}
}

// checkOrderWithin fails t unless the claims of each category came best
// first (higher priority, then lower id): priority orders tasks inside a
// category.
func checkOrderWithin(t *testing.T, got []claimed) {
	t.Helper()
	last := map[string]claimed{}
	for i, c := range got {
		if p, ok := last[c.category]; ok && (p.priority < c.priority || p.priority == c.priority && p.id > c.id) {
			t.Fatalf("claim %d: task %d (priority %d) of %s after task %d (priority %d)",
				i, c.id, c.priority, c.category, p.id, p.priority)
		}
		last[c.category] = c
	}
}

// TestFairShareFollowsWeights: one editor with several categories, each
// with thousands of tasks, claims and submits a few thousand times; each
// category gets its weight's share of the claims, the tasks of each in
// priority order.
func TestFairShareFollowsWeights(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		weights map[string]int
		claims  int
	}{
		{"3:1", map[string]int{"news": 3, "sport": 1}, 2000},
		{"equal", map[string]int{"news": 1, "sport": 1, "arts": 1}, 1800},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wf := map[string]tasks.Workflow{}
			var cats []string
			for cat, w := range tc.weights {
				wf[cat] = tasks.Workflow{Weight: w}
				cats = append(cats, cat)
			}
			b := setup(t, setupOpts{Dispatcher: dispatcher.Config{FairShare: true, Workflows: wf}})
			for _, cat := range cats {
				addMixed(t, b, cat, tc.claims) // more than each can take
			}
			ed := b.Editor(t, "ed", cats...)
			got := cycle(t, []*dispatcher.Dispatcher{b.D}, ed, tc.claims)
			if len(got) != tc.claims {
				t.Fatalf("%d claims, want %d", len(got), tc.claims)
			}
			checkShares(t, got, tc.weights)
			checkOrderWithin(t, got)
			// The store agrees: every claim but the last was submitted.
			for cat := range tc.weights {
				n := 0
				for _, c := range got[:len(got)-1] {
					if c.category == cat {
						n++
					}
				}
				if done := b.RowCount(t, "SELECT COUNT(*) FROM tasks WHERE category = ? AND status = 'done'", cat); done != n {
					t.Errorf("%d tasks of %s done in the store, the claims say %d", done, cat, n)
				}
			}
		})
	}
}

// TestFairShareSmallCategoryNotStarved: a small category of low priority
// next to a large one of high priority, equal weights. With fair share the
// small one gets every one of its tasks while the large one still has
// plenty, a claim in two; without, the best task of all comes first, as
// before: the large category's, all of them.
func TestFairShareSmallCategoryNotStarved(t *testing.T) {
	t.Parallel()
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair_share=%v", fair), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOpts{Dispatcher: dispatcher.Config{FairShare: fair}})
			big := b.Add(t, "big", 9, 200)
			small := b.Add(t, "small", 0, 10)
			ed := b.Editor(t, "ed", "big", "small")
			got := cycle(t, []*dispatcher.Dispatcher{b.D}, ed, 40)
			if len(got) != 40 {
				t.Fatalf("%d claims, want 40", len(got))
			}
			if !fair {
				// The old order: best of all categories, oldest first.
				for i, c := range got {
					if c.id != big[i] {
						t.Fatalf("claim %d is task %d of %s, want task %d of big (the best of all)", i, c.id, c.category, big[i])
					}
				}
				return
			}
			var smalls []int64
			for i, c := range got {
				if c.category == "small" {
					smalls = append(smalls, c.id)
					if i > 2*len(smalls) {
						t.Fatalf("claim %d is the %d-th of small: small waited longer than its share", i, len(smalls))
					}
				}
			}
			if fmt.Sprint(smalls) != fmt.Sprint(small) {
				t.Fatalf("small's claims %v, want all its tasks in order %v", smalls, small)
			}
			checkOrderWithin(t, got)
		})
	}
}

// TestFairShareAcrossReplicas: one editor's cycles served by two
// dispatchers in turn (two replicas behind a load balancer), each keeping
// its own shares: the whole keeps the weights.
func TestFairShareAcrossReplicas(t *testing.T) {
	t.Parallel()
	weights := map[string]int{"news": 3, "sport": 1}
	cfg := dispatcher.Config{FairShare: true, Workflows: map[string]tasks.Workflow{"news": {Weight: 3}, "sport": {Weight: 1}}}
	b := setup(t, setupOpts{Dispatcher: cfg})
	d2 := replica(t, b.Bundle, cfg)
	addMixed(t, b, "news", 1200)
	addMixed(t, b, "sport", 1200)
	ed := b.Editor(t, "ed", "news", "sport")
	got := cycle(t, []*dispatcher.Dispatcher{b.D, d2}, ed, 1200)
	if len(got) != 1200 {
		t.Fatalf("%d claims, want 1200", len(got))
	}
	checkShares(t, got, weights)
}

// replica returns a second dispatcher over b's database and Redis prefix,
// with a store of its own: another taskd process.
func replica(t *testing.T, b *dispatchtest.Bundle, cfg dispatcher.Config) *dispatcher.Dispatcher {
	t.Helper()
	st, err := store.New(b.DB, store.Config{})
	if err != nil {
		t.Fatalf("new store: %v", err)
	}
	cfg.KeyPrefix = b.Prefix
	d, err := dispatcher.New(st, b.Locks, cfg)
	if err != nil {
		t.Fatalf("new dispatcher: %v", err)
	}
	return d
}
