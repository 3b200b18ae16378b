package activity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/activity"
)

// fixedMinute returns a clock stopped in the middle of the current minute,
// so that a test's counts all fall in one minute.
func fixedMinute() func() time.Time {
	now := time.Now().Truncate(time.Minute).Add(30 * time.Second)
	return func() time.Time { return now }
}

// newRecorder starts a Recorder of d that flushes only when told to.
func newRecorder(t *testing.T, b *bundle, d *dispatcher.Dispatcher, now func() time.Time) *activity.Recorder {
	t.Helper()
	h, err := activity.New(d, activity.Config{Redis: b.RDB, FlushInterval: time.Hour, NowFunc: now})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Stop(context.Background()) })
	return h
}

// total reads the last n minutes and sums them.
func total(t *testing.T, h *activity.Recorder, n int) activity.Counts {
	t.Helper()
	ms, err := h.Read(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != n {
		t.Fatalf("read %d minutes, want %d", len(ms), n)
	}
	var c activity.Counts
	for i, m := range ms {
		if i > 0 && !m.Start.Equal(ms[i-1].Start.Add(time.Minute)) {
			t.Fatalf("minute %d starts at %v, after %v", i, m.Start, ms[i-1].Start)
		}
		c.Add(m.Counts)
	}
	return c
}

// cycles claims and submits n tasks as one editor: each submit hands out the
// next task, so n claims and n submits.
func cycles(t *testing.T, d *dispatcher.Dispatcher, c dispatcher.Claimant, n int) {
	t.Helper()
	ctx := t.Context()
	claim, err := d.Next(ctx, c, 0)
	for i := range n {
		if err != nil || claim == nil {
			t.Fatalf("cycle %d: claim %v, %v", i, claim, err)
		}
		claim, err = d.Submit(ctx, c, dispatcher.ClaimRef{TaskID: claim.Task.ID, Fence: claim.Fence}, []byte(`{"ok":true}`))
	}
	if err != nil || claim != nil {
		t.Fatalf("after %d cycles: claim %v, %v; want none", n, claim, err)
	}
}

// TestRecorderCountsClaimsAndSubmits: the claims and submits of n cycles are
// counted in memory, reach Redis with a flush (not before), and a stop
// flushes what is left.
func TestRecorderCountsClaimsAndSubmits(t *testing.T) {
	t.Parallel()
	b := setup(t)
	now := fixedMinute()
	h := newRecorder(t, b, b.D, now)
	ed := b.Editor(t, "ada", "news")
	const n = 7
	b.Add(t, "news", 1, n)

	cycles(t, b.D, ed, n)
	if c := total(t, h, 60); c.Claims != 0 || c.Submits != 0 {
		t.Fatalf("before a flush Redis has %+v: the claim path wrote to it", c)
	}
	if err := h.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := total(t, h, 60)
	if c.Claims != n || c.Submits != n || c.Measured() != n {
		t.Fatalf("after %d cycles: %d claims, %d submits, %d measured; want %d each", n, c.Claims, c.Submits, c.Measured(), n)
	}
	// The dispatcher's Stats count the same events.
	if st := b.D.Stats(); st.Assignments != c.Claims || st.Submits != c.Submits {
		t.Errorf("stats %+v, history %+v: the counts differ", st, c)
	}
	// The latencies are measured on this machine's clock: no upper bound.
	if p99, ok := c.Quantile(0.99); !ok || p99 <= 0 {
		t.Errorf("p99 %v, %v", p99, ok)
	}
	ms, err := h.Read(t.Context(), 1)
	if err != nil || len(ms) != 1 || ms[0].Claims != n || !ms[0].Start.Equal(now().Truncate(time.Minute)) {
		t.Fatalf("the current minute: %+v, %v", ms, err)
	}

	// A failed flush keeps its counts for the next.
	b.Add(t, "news", 1, 2)
	cycles(t, b.D, ed, 2)
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.Flush(canceled); err == nil {
		t.Fatal("a flush with a cancelled context succeeded")
	}
	if err := h.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := total(t, h, 60); c.Claims != n+2 || c.Submits != n+2 {
		t.Fatalf("after the failed flush and stop: %+v, want %d claims and submits", c, n+2)
	}
	// A stopped history counts nothing more.
	b.Add(t, "news", 1, 1)
	cycles(t, b.D, ed, 1)
	if err := h.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := total(t, h, 60); c.Claims != n+2 {
		t.Fatalf("a stopped history counted: %+v", c)
	}
	if _, err := h.Read(t.Context(), 0); err == nil {
		t.Error("read 0 minutes: no error")
	}
	if _, err := h.Read(t.Context(), activity.MaxMinutes+1); err == nil {
		t.Error("read past the limit: no error")
	}
}

// TestRecorderMergesReplicas: two dispatchers over the same stores, each with
// its Recorder, count their own claims; each reads the sum, and the latency
// buckets add up so that p50 and p99 are those of all claims.
func TestRecorderMergesReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, err := dispatcher.New(b.Store, b.Locks, dispatcher.Config{KeyPrefix: b.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	now := fixedMinute()
	h1, h2 := newRecorder(t, b, b.D, now), newRecorder(t, b, other, now)
	b.Add(t, "news", 1, 3)
	cycles(t, b.D, b.Editor(t, "ada", "news"), 3)
	b.Add(t, "news", 1, 2)
	cycles(t, other, b.Editor(t, "bo", "news"), 2)
	if err := h1.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h2.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, h := range []*activity.Recorder{h1, h2} {
		if c := total(t, h, 5); c.Claims != 5 || c.Submits != 5 || c.Measured() != 5 {
			t.Fatalf("replica %d reads %+v, want 5 claims and submits from both", i+1, c)
		}
	}

	// Latencies of our choosing: 98 fast claims on one replica, 2 slow on
	// the other (and the 5 real ones, all far under 200ms).
	for range 98 {
		h1.CountClaim(1500 * time.Microsecond)
	}
	h2.CountClaim(300 * time.Millisecond)
	h2.CountClaim(400 * time.Millisecond)
	for _, h := range []*activity.Recorder{h1, h2} {
		if err := h.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	ms, err := h2.Read(t.Context(), 1)
	if err != nil {
		t.Fatal(err)
	}
	c := ms[0].Counts
	if c.Claims != 105 || c.Latency[8] != 2 {
		t.Fatalf("merged minute %+v: want 105 claims, 2 in (200ms, 500ms]", c)
	}
	// The 104th of 105 is in (200ms, 500ms], past 103 faster ones: rank
	// 0.99×105 = 103.95, so 200ms + 300ms × 0.95/2.
	p99, ok := c.Quantile(0.99)
	if want := 200*time.Millisecond + time.Duration(300*0.95/2*float64(time.Millisecond)); !ok || (p99-want).Abs() > time.Microsecond {
		t.Fatalf("p99 = %v, want %v", p99, want)
	}
	if p50, ok := c.Quantile(0.5); !ok || p50 > 20*time.Millisecond {
		t.Fatalf("p50 = %v, want that of the fast claims", p50)
	}
}

// A stopped Recorder does not start again.
func TestRecorderLifecycle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	h := newRecorder(t, b, b.D, time.Now)
	if err := h.Start(t.Context()); !errors.Is(err, dispatcher.ErrStarted) {
		t.Fatalf("second start: %v, want ErrStarted", err)
	}
	if err := h.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); !errors.Is(err, dispatcher.ErrStopped) {
		t.Fatalf("start after stop: %v, want ErrStopped", err)
	}
	if _, err := activity.New(b.D, activity.Config{}); err == nil {
		t.Error("a recorder without Redis")
	}
}
