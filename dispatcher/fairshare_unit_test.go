package dispatcher

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

// pick is the category an editor's next claim goes to when every one of
// cats has a task: the first in fair share's order. It charges it.
func pick(f *fairShare, editorID int64, cats []string) string {
	cat := f.order(editorID, cats)[0]
	f.charge(editorID, cat, cats)
	return cat
}

// A category that ran dry while another was claimed comes back level with
// it, not ahead by the claims it missed: it does not take a long run of
// claims in a row and starve the other in turn.
func TestFairShareRejoinsAtVirtualTime(t *testing.T) {
	f := newFairShare(map[string]tasks.Workflow{"a": {Weight: 2}})
	cats := []string{"a", "b"}
	for range 300 { // b dry: every claim is a's
		f.charge(1, "a", cats)
	}
	counts := map[string]int{}
	for range 30 {
		counts[pick(f, 1, cats)]++
	}
	if counts["a"] != 20 || counts["b"] != 10 {
		t.Fatalf("after b came back, 30 claims went %v; want a:20 b:10 (weights 2:1)", counts)
	}
}

// Editors' shares are their own, and an editor whose categories change
// keeps no pass of those it left.
func TestFairSharePerEditor(t *testing.T) {
	f := newFairShare(nil)
	for range 5 {
		f.charge(1, "a", []string{"a", "b"})
	}
	if got := f.order(2, []string{"a", "b"}); got[0] != "a" {
		t.Fatalf("a new editor's order %v, want the categories' own", got)
	}
	if got := f.order(1, []string{"a", "b"}); got[0] != "b" {
		t.Fatalf("editor 1's order %v after 5 claims of a, want b first", got)
	}
	f.charge(1, "c", []string{"b", "c"})
	if _, ok := f.editors[1].pass["a"]; ok {
		t.Fatal("editor 1 keeps a pass for a, which it no longer has")
	}
}

// Editors idle for fairShareIdleFor are forgotten.
func TestFairShareForgetsIdleEditors(t *testing.T) {
	f := newFairShare(nil)
	now := f.clock()
	f.clock = func() time.Time { return now }
	f.charge(1, "a", []string{"a", "b"})
	f.clock = func() time.Time { return now.Add(fairShareIdleFor + time.Second) }
	f.charge(2, "a", []string{"a", "b"})
	f.mu.Lock()
	f.forget(f.clock())
	_, kept1 := f.editors[1]
	_, kept2 := f.editors[2]
	f.mu.Unlock()
	if kept1 || !kept2 {
		t.Fatalf("after forget: editor 1 kept %v (idle, want false), editor 2 kept %v (want true)", kept1, kept2)
	}
}

// An ordered take (fair share) takes from the first category of its order
// that has a candidate, whatever the others' priorities, and only from it;
// a take of one category (rate limits) takes only from the best
// candidate's category.
func TestCandidatePoolOrderedAndOneCategoryTakes(t *testing.T) {
	many := func(prio int, from int64) []tasks.Candidate {
		ids := make([]int64, 64)
		for i := range ids {
			ids[i] = from + int64(i)
		}
		return cands(prio, ids...)
	}
	f := &fakeReads{cats: map[string][]tasks.Candidate{
		"news":  many(1, 100),
		"sport": many(5, 200),
		"empty": nil,
	}}
	p := newCandidatePool(64, f.read)
	ctx := context.Background()
	got, err := p.takeN(ctx, []string{"empty", "news", "sport"}, 2, nil, takeOpts{ordered: true})
	if err != nil || !slices.Equal(pooledIDs(got), []int64{100, 101}) {
		t.Fatalf("ordered take = %v, %v; want [100 101]: news's best, news being first with tasks", pooledIDs(got), err)
	}
	got, err = p.takeN(ctx, []string{"news", "sport"}, 40, nil, takeOpts{many: true, one: true})
	if err != nil || len(got) != 40 {
		t.Fatalf("take of one category = %d candidates, %v; want 40", len(got), err)
	}
	for _, c := range got {
		if c.category != "sport" {
			t.Fatalf("take of one category handed out %d of %s among sport's (the best)", c.ID, c.category)
		}
	}
	got, err = p.takeN(ctx, []string{"news", "sport"}, 40, nil, takeOpts{many: true})
	if err != nil || len(got) != 40 || got[0].category != "sport" || got[39].category != "news" {
		t.Fatalf("a plain batch = %d candidates, %v; want 40 across both categories, best first", len(got), err)
	}
}
