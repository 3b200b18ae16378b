package dispatcher

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// Op names what a ClaimEvent records.
type Op string

// The operations a ClaimEvent records: a committed claim, and the writes that
// end one.
const (
	OpClaim         Op = "claim"          // a claim committed (Next, Submit's next, a worker's)
	OpSubmit        Op = "submit"         // a result committed (Submit, a worker's handler)
	OpRelease       Op = "release"        // the holder gave the task back (Release, Skip)
	OpFail          Op = "fail"           // a worker's handler failed: retried or dead
	OpSnooze        Op = "snooze"         // a worker's handler snoozed: the task runs later, or is dead at its limit
	OpForceRelease  Op = "force_release"  // an operator took the task back
	OpDisableEditor Op = "disable_editor" // the editor was disabled while holding it
)

// ClaimEvent is one claim committed, or one claim ended, as the Dispatcher
// counts it: each is counted once, here, and what counts it (Stats, the
// OpenTelemetry metrics, the activity history) observes the event.
type ClaimEvent struct {
	Op       Op
	Category string
	// Latency, for OpClaim, is how long the claim took: from the start of
	// the attempt to the committed claim, not the time a long poll waited
	// for a task to arrive.
	Latency time.Duration
	// TookOver, for OpClaim, is set when the claim took over a claim whose
	// lease had passed.
	TookOver bool
	// QueueWait, for OpClaim, is how long the task waited to be claimed: from
	// the moment it became claimable (its insert or its run_after, a release,
	// recycle, requeue or send back, the end of a retry's backoff, the lease
	// end of a claim taken over) to the claim, both on the database clock.
	QueueWait time.Duration
	// Held, for the other operations, is how long the claim was held.
	Held time.Duration
}

// observer is one function Observe registered.
type observer struct {
	f func(context.Context, ClaimEvent)
}

// observers is the list of functions the Dispatcher calls with each ClaimEvent.
// It is copied on change, so emitting takes no lock.
type observers struct {
	mu   sync.Mutex // serializes changes
	list atomic.Pointer[[]*observer]
}

// Observe calls f with each ClaimEvent from now on, in the goroutine that
// committed the claim or the write, until the returned function is called:
// f must be quick and must not block (count in memory, write later). The
// Dispatcher's Stats and metrics are the first two observers; the engine's
// activity history is another.
func (d *Dispatcher) Observe(f func(context.Context, ClaimEvent)) (stop func()) {
	o := &observer{f}
	d.obs.change(func(l []*observer) []*observer { return append(l, o) })
	var once sync.Once
	return func() {
		once.Do(func() {
			d.obs.change(func(l []*observer) []*observer {
				return slices.DeleteFunc(l, func(p *observer) bool { return p == o })
			})
		})
	}
}

// change replaces the list with edit's result on a copy.
func (os *observers) change(edit func([]*observer) []*observer) {
	os.mu.Lock()
	defer os.mu.Unlock()
	var cur []*observer
	if p := os.list.Load(); p != nil {
		cur = slices.Clone(*p)
	}
	next := edit(cur)
	os.list.Store(&next)
}

// emit hands ev to every observer.
func (d *Dispatcher) emit(ctx context.Context, ev ClaimEvent) {
	if p := d.obs.list.Load(); p != nil {
		for _, o := range *p {
			o.f(ctx, ev)
		}
	}
}

// observe counts ev in the running totals behind Stats.
func (c *counters) observe(_ context.Context, ev ClaimEvent) {
	switch ev.Op {
	case OpClaim:
		c.assignments.Add(1)
	case OpSubmit:
		c.submits.Add(1)
	}
}

// observe counts ev in the metrics: claims by category (and those that took
// over an expired lease) and their queue wait, and how long ended claims were
// held.
func (t *telemetry) observe(ctx context.Context, ev ClaimEvent) {
	cat := attrCategory.String(ev.Category)
	switch ev.Op {
	case OpClaim:
		t.assignments.Add(ctx, 1, metric.WithAttributes(cat))
		t.queueWait.Record(ctx, ev.QueueWait.Seconds(), metric.WithAttributes(cat))
		if ev.TookOver {
			t.expired.Add(ctx, 1, metric.WithAttributes(cat))
		}
	default:
		t.holdTime.Record(ctx, ev.Held.Seconds(), metric.WithAttributes(cat, attrOperation.String(string(ev.Op))))
	}
}
