package store_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestRecycleExpiredReturnsWhatItRecycled(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")

	// An earlier recycle: its claim must not be reported again.
	old := b.insertOne(t, "news", 0)
	b.claim(t, old, "w-old", 0, time.Minute)
	b.expireLease(t, old)
	if rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{}); err != nil || len(rs) != 1 {
		t.Fatalf("earlier recycle = %v, %v; want 1", rs, err)
	}

	want := map[int64]tasks.Recycled{}
	var live []int64
	for i := range 7 {
		cat := []string{"news", "sport"}[i%2]
		id := b.insertOne(t, cat, i)
		holder, editorID := fmt.Sprintf("w%d", i), int64(0)
		if i == 0 {
			holder, editorID = ed.Holder(), ed.ID
		}
		c := b.claim(t, id, holder, editorID, time.Minute)
		if i == 6 {
			live = append(live, id)
			continue
		}
		b.expireLease(t, id)
		want[id] = tasks.Recycled{ID: id, Fence: c.Fence, Holder: holder, Category: cat}
	}
	pending := b.insertOne(t, "news", 0)
	before := map[int64]tasks.Task{pending: *b.task(t, pending), live[0]: *b.task(t, live[0])}

	got := map[int64]tasks.Recycled{}
	var batches []int
	for {
		rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, len(rs))
		for _, r := range rs {
			if _, dup := got[r.ID]; dup {
				t.Errorf("task %d reported twice", r.ID)
			}
			if r.ExpiredFor < time.Second { // expireLease: a second ago
				t.Errorf("task %d reported expired for %v, want at least 1s", r.ID, r.ExpiredFor)
			}
			r.ExpiredFor = 0 // checked above; the rest must be as claimed
			got[r.ID] = r
		}
		if len(rs) < 4 {
			break
		}
	}
	if fmt.Sprint(batches) != "[4 2]" {
		t.Errorf("batches = %v, want [4 2]", batches)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("recycled:\n got %v\nwant %v", got, want)
	}
	for id := range want {
		if task := b.task(t, id); task.Status != tasks.StatusPending || task.Holder != "" {
			t.Errorf("task %d after recycle: status %s holder %q", id, task.Status, task.Holder)
		}
		evs := b.events(t, id)
		if last := evs[len(evs)-1]; last.Kind != tasks.EventRecycled || last.Fence != want[id].Fence || last.Holder != want[id].Holder {
			t.Errorf("task %d last event = %+v, want recycled with the old fence and holder", id, last)
		}
	}
	for id, task := range before {
		if after := b.task(t, id); after.Status != task.Status || after.Fence != task.Fence || after.Holder != task.Holder {
			t.Errorf("task %d changed: %+v -> %+v", id, task, after)
		}
	}

	rs, err := b.store.RecycleExpired(b.ctx, tasks.RecycleParams{})
	if err != nil || len(rs) != 0 {
		t.Errorf("recycle with nothing expired = %v, %v; want none", rs, err)
	}
	_, err = b.store.RecycleExpired(b.ctx, tasks.RecycleParams{Limit: tasks.RecycleLimitMax + 1})
	wantErr(t, "limit too large", err, tasks.ErrInvalid)
}

func TestLiveLeasesHaveTheDatabaseRemainingLease(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	leases := map[int64]time.Duration{}
	var ids []int64
	for i, lease := range []time.Duration{time.Minute, time.Hour, 0, 10 * time.Minute, time.Minute} {
		id := b.insertOne(t, "news", 0)
		if lease == 0 { // stays pending
			continue
		}
		b.claim(t, id, fmt.Sprintf("w%d", i), 0, lease)
		if i == 4 {
			b.expireLease(t, id) // not live
			continue
		}
		leases[id] = lease
		ids = append(ids, id)
	}

	var got []int64
	var after int64
	pages := 0
	for {
		page, err := b.store.LiveLeases(b.ctx, tasks.LiveLeasesParams{AfterID: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, l := range page {
			lease := leases[l.ID]
			// The claim was made moments ago: the lease has at most its full length
			// left, and surely more than half of it.
			if l.Remaining > lease || l.Remaining < lease/2 || l.Fence != 1 || l.Holder == "" {
				t.Errorf("live lease %+v, want about %v left", l, lease)
			}
			got = append(got, l.ID)
			after = l.ID
		}
		if len(page) < 2 {
			break
		}
	}
	if !slices.Equal(got, ids) || pages != 2 {
		t.Errorf("live leases of %v in %d pages, want %v in 2", got, pages, ids)
	}
	_, err := b.store.LiveLeases(b.ctx, tasks.LiveLeasesParams{Limit: tasks.LiveLeasesLimitMax + 1})
	wantErr(t, "limit too large", err, tasks.ErrInvalid)
}

func TestLiveHoldersOnlyOfLiveClaims(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ed := b.editor(t, "alice", "news")
	live := b.insertOne(t, "news", 0)
	b.claim(t, live, "w1", 0, time.Minute)
	liveEditor := b.insertOne(t, "news", 0)
	b.claim(t, liveEditor, ed.Holder(), ed.ID, time.Minute)
	expired := b.insertOne(t, "news", 0)
	b.claim(t, expired, "w2", 0, time.Minute)
	b.expireLease(t, expired)
	done := b.insertOne(t, "news", 0)
	c := b.claim(t, done, "w3", 0, time.Minute)
	if _, err := b.store.Submit(b.ctx, tasks.SubmitParams{TaskID: done, Fence: c.Fence, Holder: "w3", Result: rawJSON(`1`)}); err != nil {
		t.Fatal(err)
	}
	pending := b.insertOne(t, "news", 0)

	got, err := b.store.LiveHolders(b.ctx, []int64{pending, live, expired, done, 1 << 40, liveEditor, live})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]string{live: "w1", liveEditor: ed.Holder()}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("live holders = %v, want %v", got, want)
	}

	if got, err := b.store.LiveHolders(b.ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("live holders of no ids = %v, %v; want none", got, err)
	}
	_, err = b.store.LiveHolders(b.ctx, make([]int64, tasks.LiveLeasesLimitMax+1))
	wantErr(t, "too many ids", err, tasks.ErrInvalid)
}
