package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/lease"
	"github.com/taskd/taskd/tasks"
)

// noSlot is the slot of an outcome whose slot passed to a claim (carry):
// its answer frees none.
const noSlot = -1

// completer writes a worker's outcomes in batches: up to BatchSize per
// transaction (store.Store.Complete), then the locks of the claims they ended
// given back in one script. A batch is written as soon as the first writer
// is free and either BatchSize outcomes wait, no other run is unsettled
// (nothing more is coming), or the oldest has waited FlushInterval: no timer
// runs when there is nothing to group. The other writers (writers in
// all) write only full batches, while the first is busy: they work off a
// backlog and never split what the first would write in one transaction.
type completer struct {
	w *Worker

	mu     sync.Mutex
	queue  []*outcome
	closed bool
	wake   chan struct{} // has a value once an outcome arrived or close was called
	// backlog has a value once BatchSize outcomes wait, or close was called:
	// the wake-up of the writers after the first.
	backlog chan struct{}
	// space has a value once a write took outcomes off a full queue.
	space   chan struct{}
	writers sync.WaitGroup
}

func newCompleter(w *Worker) *completer {
	return &completer{w: w, wake: make(chan struct{}, 1), backlog: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// start starts the writers.
func (c *completer) start() {
	for i := range writers(c.w.cfg) {
		c.writers.Go(func() { c.run(i > 0) })
	}
}

// settled ends a run: its outcome o is queued, or with o nil, it has none
// (the run's claim was lost or given back). It never blocks: the claim loop
// stops claiming while the queue is full, so the queue holds at most
// MaxBacklog outcomes plus one per slot.
func (c *completer) settled(o *outcome) {
	c.mu.Lock()
	if o != nil {
		o.queuedAt = time.Now()
		c.queue = append(c.queue, o)
	}
	c.w.unsettled.Add(-1)
	full := len(c.queue) >= c.w.cfg.BatchSize
	c.mu.Unlock()
	signal(c.wake)
	if full {
		signal(c.backlog)
	}
	if o != nil && c.w.cfg.SlotsUntilWritten {
		// The first claim loop can carry the outcome and reuse its slot
		// (see carry).
		signal(c.w.slots.freed)
	}
}

// len returns the number of outcomes waiting.
func (c *completer) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// full reports whether MaxBacklog outcomes wait.
func (c *completer) full() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue) >= c.w.cfg.MaxBacklog
}

// close makes the writers return once the queue is empty, and waits for
// them.
func (c *completer) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	signal(c.wake)
	signal(c.backlog)
	c.writers.Wait()
}

// run writes batches until closed and empty; an extra writer (not the
// first) writes only full batches.
func (c *completer) run(extra bool) {
	wake := c.wake
	if extra {
		wake = c.backlog
	}
	// A writer passes a wake-up on when it leaves, or when it takes a batch
	// and more is queued, so that another writer woken by the same channel
	// sees it too.
	defer signal(wake)
	var timer *time.Timer
	for {
		batch, wait := c.next(extra)
		if batch == nil && wait == 0 {
			return
		}
		if batch == nil {
			if wait > 0 {
				if timer == nil {
					timer = time.NewTimer(wait)
				} else {
					timer.Reset(wait)
				}
				select {
				case <-wake:
				case <-timer.C:
				}
				timer.Stop()
			} else {
				<-wake
			}
			continue
		}
		if c.waiting(extra) {
			signal(wake)
		}
		c.write(batch)
	}
}

// waiting reports whether outcomes are queued: a full batch of them for an
// extra writer.
func (c *completer) waiting(extra bool) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if extra {
		return len(c.queue) >= c.w.cfg.BatchSize
	}
	return len(c.queue) > 0
}

// next takes the next batch off the queue. When there is none to write yet,
// it returns how long to wait for one: > 0 for a gathering batch, < 0 for
// an empty queue (for an extra writer, one without a full batch); (nil, 0)
// when closed and empty.
func (c *completer) next(extra bool) ([]*outcome, time.Duration) {
	cfg := c.w.cfg
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		if c.closed {
			return nil, 0
		}
		return nil, -1
	}
	if extra && len(c.queue) < cfg.BatchSize && !c.closed {
		return nil, -1
	}
	// With SlotsUntilWritten, a batch waits for the first claim loop while
	// it is waiting to claim: it carries the batch, in the claim's
	// transaction, and reuses the batch's slots (see carry).
	gathering := c.w.unsettled.Load() > 0 || cfg.SlotsUntilWritten && c.w.carrying.Load()
	if len(c.queue) < cfg.BatchSize && !c.closed && cfg.FlushInterval > 0 && gathering {
		if wait := time.Until(c.queue[0].queuedAt.Add(cfg.FlushInterval)); wait > 0 {
			return nil, wait
		}
	}
	return c.takeLocked(cfg.BatchSize), 0
}

// takeLocked takes a batch off the queue: up to max outcomes, within
// workerBatchBytesMax (at least one). c.mu is held.
func (c *completer) takeLocked(max int) []*outcome {
	n, size := 0, 0
	for n < len(c.queue) && n < max {
		size += len(c.queue[n].result)
		if n > 0 && size > workerBatchBytesMax {
			break
		}
		n++
	}
	full := len(c.queue) >= c.w.cfg.MaxBacklog
	batch := make([]*outcome, n)
	copy(batch, c.queue)
	c.queue = append(c.queue[:0], c.queue[n:]...)
	if full && len(c.queue) < c.w.cfg.MaxBacklog {
		signal(c.space)
	}
	return batch
}

// queued takes a batch off the queue for a claim to carry, whether or not
// the batch would wait to grow (FlushInterval): it costs no transaction of
// its own. It returns nil when nothing waits.
func (c *completer) queued() []*outcome {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return nil
	}
	return c.takeLocked(c.w.cfg.BatchSize)
}

// carry takes up to n outcomes off the queue for a claim of a worker with
// SlotsUntilWritten to carry (writeCarrying), and returns them with their
// slots, which pass to the claim: the claim's transaction writes the
// outcomes before it counts the tasks in flight, so it may claim for their
// slots, and their answers free none of them (noSlot). It returns nothing
// when nothing waits or n < 1.
func (c *completer) carry(n int) ([]*outcome, []int) {
	if n < 1 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return nil, nil
	}
	batch := c.takeLocked(n)
	slots := make([]int, len(batch))
	for i, o := range batch {
		slots[i], o.slot = o.slot, noSlot
	}
	return batch, slots
}

// writeCarrying writes batch, outcomes carry took, in the transaction of a
// claim for holders (Dispatcher.CompleteAndClaimMany), or alone when the
// claim had nothing to claim, and returns the claims made. Every outcome of
// batch is written (or its write failed) when it returns: the caller may
// then claim for, or free, the slots carry gave it.
func (c *completer) writeCarrying(batch []*outcome, holders, categories []string) []*tasks.Claim {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.w.handlersCtx), workerFinishTimeout)
	defer cancel()
	carried := false
	claims, _ := c.w.d.CompleteAndClaimMany(ctx, func() ([]dispatcher.Outcome, func(int, *tasks.Ended, error) bool) {
		carried = true
		return c.outcomes(batch)
	}, len(batch), holders, categories)
	if !carried {
		c.write(batch)
	}
	return claims
}

// write writes a batch and hands each member's answer to the worker.
func (c *completer) write(batch []*outcome) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.w.handlersCtx), workerFinishTimeout)
	defer cancel()
	os, done := c.outcomes(batch)
	c.w.d.CompleteMany(ctx, os, done)
}

// writeClaiming claims for holders and, once the claim has candidates
// locked to claim, takes the outcomes waiting (queued) and writes them in
// the claim's transaction (Dispatcher.CompleteAndClaimMany). It returns the
// claims made: none when there was nothing to claim (nothing was written
// then) or the joint transaction failed (the outcomes were then written
// alone).
func (c *completer) writeClaiming(holders, categories []string) []*tasks.Claim {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.w.handlersCtx), workerFinishTimeout)
	defer cancel()
	claims, _ := c.w.d.CompleteAndClaimMany(ctx, func() ([]dispatcher.Outcome, func(int, *tasks.Ended, error) bool) {
		batch := c.queued()
		if len(batch) == 0 {
			return nil, nil
		}
		return c.outcomes(batch)
	}, 0, holders, categories)
	return claims
}

// outcomes returns the store's outcomes of batch, and the function handing
// the answer about each to the worker.
func (c *completer) outcomes(batch []*outcome) ([]dispatcher.Outcome, func(i int, ended *tasks.Ended, err error) bool) {
	w := c.w
	os := make([]dispatcher.Outcome, len(batch))
	for i, o := range batch {
		os[i] = dispatcher.Outcome{Span: o.span, Outcome: tasks.Outcome{
			TaskID: o.ref.TaskID, Fence: o.ref.Fence, Holder: o.holder, Result: o.result,
		}}
		switch {
		case o.snooze:
			os[i].Snooze = &tasks.Snooze{For: o.backoff, Max: w.cfg.MaxSnoozes}
		case o.result == nil:
			os[i].Err, os[i].Backoff, os[i].Dead = o.err.Error(), o.backoff, o.skipRetry
		}
	}
	return os, func(i int, ended *tasks.Ended, err error) bool {
		o := batch[i]
		if o.result != nil && os[i].Result == nil {
			// The store refused the result: it was recorded as a failure.
			o.err = fmt.Errorf("%s: %w", os[i].Err, SkipRetry)
			o.result, o.skipRetry = nil, true
		}
		return w.completed(o, ended, err)
	}
}

// signal sends on a channel of capacity 1 without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// leaseKeeper renews the leases of every claim a worker holds, in batches:
// each round renews the claims last renewed a third of a lease ago or more,
// with one store.Store.HeartbeatBatch and one locker ObtainEach for their
// Redis locks. A round runs every sixth of a lease, so each claim is renewed
// every third to half of a lease, and a failed round is retried at the next.
// A claim whose renewal the store refused (stale, or at the hold limit), or
// whose lease passed without a renewal, is lost: its handler's context is
// cancelled with a cause wrapping ErrLeaseLost (ErrCancelled for a claim a
// cancel ended: see cancelled), unless the handler has returned already
// (sealed), in which case its outcome's write finds out.
//
// Deadlines come from the database clock and are compared with the local
// one: this assumes the clocks agree (same host, or NTP). A local clock
// running behind only delays the cancellation; the store's fencing still
// refuses the stale holder's writes.
type leaseKeeper struct {
	w *Worker

	mu     sync.Mutex
	held   map[int64]*leased
	closed chan struct{}
	exited chan struct{}
}

// leased is one claim the keeper renews.
type leased struct {
	ref     dispatcher.ClaimRef
	holder  string
	until   time.Time // the lease's end, database clock
	renewed time.Time // when it was last renewed (or claimed), local clock
	lost    context.CancelCauseFunc
	sealed  bool  // the handler returned: cancel nothing
	inTx    bool  // a transaction of the handler's holds the row (CompleteTx): renew and cancel nothing
	gone    bool  // lost: renewed no more
	last    error // of the last failed renewal
}

func newLeaseKeeper(w *Worker) *leaseKeeper {
	return &leaseKeeper{w: w, held: make(map[int64]*leased), closed: make(chan struct{}), exited: make(chan struct{})}
}

// add starts renewing a claim whose lease ends at until; lost cancels its
// handler.
func (k *leaseKeeper) add(ref dispatcher.ClaimRef, holder string, until time.Time, lost context.CancelCauseFunc) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.held[ref.TaskID] = &leased{ref: ref, holder: holder, until: until, renewed: time.Now(), lost: lost}
}

// seal notes that a claim's handler returned, so that a lost lease cancels
// nothing from now on, and reports whether the claim is still held (false:
// it was lost already).
func (k *leaseKeeper) seal(ref dispatcher.ClaimRef) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.held[ref.TaskID]
	if l == nil || l.ref != ref || l.gone {
		return false
	}
	l.sealed = true
	return true
}

// hold notes that a transaction of the claim's handler holds the task's row
// locked with the claim's outcome written (CompleteTx): nothing can end or
// take over the claim before that transaction ends, so the claim is renewed
// no more, which would wait for the row, and its lease passing cancels
// nothing. The handler ends the transaction and returns.
func (k *leaseKeeper) hold(ref dispatcher.ClaimRef) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.held[ref.TaskID]; l != nil && l.ref == ref {
		l.inTx = true
	}
}

// remove stops renewing a claim: it ended, or was given up. A later claim
// of the same task (after this one was lost) is left alone.
func (k *leaseKeeper) remove(ref dispatcher.ClaimRef) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if l := k.held[ref.TaskID]; l != nil && l.ref == ref {
		delete(k.held, ref.TaskID)
	}
}

// close stops the renewals and waits for a round in flight.
func (k *leaseKeeper) close() {
	close(k.closed)
	<-k.exited
}

// run renews until closed.
func (k *leaseKeeper) run(ctx context.Context) {
	defer close(k.exited)
	leaseTTL := k.w.lease
	tick := time.NewTicker(max(leaseTTL/6, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-k.closed:
			return
		case <-tick.C:
		}
		k.round(ctx)
	}
}

// round renews the claims that are due, and gives up those whose lease
// passed.
func (k *leaseKeeper) round(ctx context.Context) {
	every := k.w.lease / 3
	now := time.Now()
	k.mu.Lock()
	var due []*leased
	for _, l := range k.held {
		if !l.gone && !l.inTx && now.Sub(l.renewed) >= every {
			due = append(due, l)
		}
	}
	k.mu.Unlock()
	for len(due) > 0 {
		n := min(len(due), tasks.BatchMax)
		k.renew(ctx, due[:n])
		due = due[n:]
	}
	k.expire()
}

// renew renews the leases of due in one batch per store
// (Dispatcher.HeartbeatMany, which also extends their Redis locks).
func (k *leaseKeeper) renew(ctx context.Context, due []*leased) {
	ps := make([]tasks.HeartbeatParams, len(due))
	for i, l := range due {
		ps[i] = tasks.HeartbeatParams{TaskID: l.ref.TaskID, Fence: l.ref.Fence, Holder: l.holder, Lease: k.w.lease}
	}
	// A renewal answered after the first lease it was meant to extend has
	// ended cannot be trusted to have come in time.
	hctx, cancel := context.WithTimeout(ctx, k.w.lease/3)
	defer cancel()
	sent := time.Now()
	res, err := k.w.d.HeartbeatMany(hctx, ps)
	if err != nil {
		k.w.log.WarnContext(ctx, "heartbeat", "claims", len(due), "err", err)
	}

	k.mu.Lock()
	for i, l := range due {
		if k.held[l.ref.TaskID] != l {
			continue // ended meanwhile
		}
		switch {
		case err != nil:
			l.last = err
		case res[i].Err == nil:
			l.until, l.renewed, l.last = res[i].LeaseExpiresAt, sent, nil
		case l.sealed, l.inTx:
			// The handler returned, or its transaction held the row until
			// it ended (CompleteTx); its outcome's write, or the read of
			// whether the transaction committed it, finds the loss out.
			l.gone = true
		default:
			k.lose(l, res[i].Err)
		}
	}
	k.mu.Unlock()
}

// expire gives up the claims whose lease passed without a renewal.
func (k *leaseKeeper) expire() {
	now := time.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, l := range k.held {
		if !l.gone && !l.sealed && !l.inTx && !now.Before(l.until) {
			k.lose(l, &lease.ExpiredError{Until: l.until, Last: l.last})
		}
	}
}

// lose cancels a lost claim's handler with a cause wrapping err and
// ErrLeaseLost, or, for a claim a cancel ended (err wraps ErrCancelled), err
// alone: the task is not lost to another claim. k.mu is held.
func (k *leaseKeeper) lose(l *leased, err error) {
	l.gone = true
	if errors.Is(err, ErrCancelled) {
		l.lost(err)
		return
	}
	l.lost(fmt.Errorf("%w: heartbeat task %d: %w", ErrLeaseLost, l.ref.TaskID, err))
}

// cancelled is told of a claim a cancel ended (Dispatcher.WatchCancels):
// when the worker holds it, its handler's context is cancelled with a cause
// wrapping ErrCancelled, as the claim's next renewal would, only sooner, and
// the claim is renewed no more.
func (k *leaseKeeper) cancelled(ref dispatcher.ClaimRef) {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.held[ref.TaskID]
	if l == nil || l.ref != ref || l.gone {
		return
	}
	if l.sealed {
		// The handler returned; its outcome's write is refused.
		l.gone = true
		return
	}
	k.lose(l, fmt.Errorf("task %d fence %d: %w", ref.TaskID, ref.Fence, ErrCancelled))
}
