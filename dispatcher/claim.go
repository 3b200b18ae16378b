package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/internal/aside"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

// Next returns the claimant's assignment: the claim an editor already holds
// (same fence: asking again is idempotent), or a new claim on the best
// claimable task of its categories (highest priority, then oldest).
//
// With wait > 0 (capped at Config.MaxWait) and nothing claimable, Next waits
// until a task arrives or the wait ends, without polling the store for each
// waiting caller; it returns ErrNoTask when the wait ends empty-handed, and
// the context's error when ctx ends first. It returns an error wrapping
// tasks.ErrEditorDisabled when the store refuses the claim because the editor
// is disabled (checked under the lock of the editor's row, whatever c says).
// Errors from an unreachable store wrap ErrUnavailable.
func (d *Dispatcher) Next(ctx context.Context, c Claimant, wait time.Duration) (*tasks.Claim, error) {
	return d.next(ctx, c, wait, true, nil)
}

// handover is what a submit hands over to the claim of the claimant's next
// task. Its Redis lock is given back in the round trip that takes the next
// candidate's (locker.Options.ReleaseFirst); done is set once a call to Redis
// carried the release, and if none did (no candidate to take), the caller
// releases the lock itself. The submit goes to the store in the batch that
// claims the first candidate locked (store.Store.SubmitAndClaim): one round
// trip and one commit for the whole cycle.
type handover struct {
	key  string
	done bool
	// submit, while not nil, is the submit not sent yet; the claim sends it
	// before or with its first claim (the claimant holds its task until it
	// is submitted, so no claim may go first). It is nil once sent.
	submit *tasks.SubmitParams
	// ended is the claim the submit ended, once the store accepted it; err
	// is why it did not.
	ended *tasks.Ended
	err   error
}

// next is Next; checkHeld says whether to look for a claim the editor holds,
// and h, when not nil, is a lock to give back on the way.
func (d *Dispatcher) next(ctx context.Context, c Claimant, wait time.Duration, checkHeld bool, h *handover) (claim *tasks.Claim, err error) {
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.next", trace.WithAttributes(claimerAttrs(c)...),
		trace.WithAttributes(attrWaitMS.Int64(wait.Milliseconds())))
	defer func() {
		if claim != nil {
			span.SetAttributes(claimAttrs(claim)...)
		}
		endSpan(span, err)
	}()
	if c.Holder == "" {
		return nil, fmt.Errorf("next: %w: empty holder", tasks.ErrInvalid)
	}
	var reserved []tasks.Candidate
	if c.EditorID != 0 && checkHeld {
		ec, err := deep(wait, func() (*tasks.EditorClaims, error) { return d.store.EditorClaims(ctx, c.EditorID) })
		if err != nil {
			return nil, Unavailable(err)
		}
		// A live hedge takes a slot too (see tasks.Hedge).
		hedged, err := deep(wait, func() ([]*tasks.Claim, error) { return d.heldHedges(ctx, c) })
		if err != nil {
			return nil, Unavailable(err)
		}
		if len(ec.Held)+len(hedged) >= max(1, c.Capacity) {
			// At capacity: the oldest claim it holds.
			span.SetAttributes(attrOutcome.String("held"))
			if len(ec.Held) == 0 {
				return hedged[0], nil
			}
			return ec.Held[0], nil
		}
		reserved = ec.Reserved
	}
	return waitForTask(ctx, d, c.Categories, wait, func() (*tasks.Claim, error) {
		claim, err := d.claim(ctx, c, h, reserved)
		reserved = nil // tried once
		if errors.Is(err, ErrNoTask) && h == nil && checkHeld {
			// Nothing in the pool: a held task near its due_at, maybe.
			claim, err = d.takeHedge(ctx, c)
		}
		return claim, err
	})
}

// waitForTask runs try, which returns ErrNoTask when the pool has nothing
// for categories, until it returns anything else: again whenever a task
// arrives in one of categories (the hub's wake-up) or the hub's poll picks
// this caller to look (see hub), for up to wait (capped at Config.MaxWait),
// then ErrNoTask. With no wait it runs try once.
//
// The caller stays subscribed from its first try to its return, so it keeps
// its place among the category's waiters (oldest first) however often it is
// woken, and a task arriving while try looks is not missed (see hub). While
// it waits it holds no timer of its own but its wait's.
func waitForTask[T any](ctx context.Context, d *Dispatcher, categories []string, wait time.Duration, try func() (T, error)) (T, error) {
	var none T
	wait = min(wait, d.cfg.MaxWait)
	if wait <= 0 {
		return try()
	}
	w := d.hub.subscribe(categories)
	defer d.hub.leave(w)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	var woke wakeUp // what woke the look being made; zero for the first
	for {
		got, err := deep(wait, try)
		if !errors.Is(err, ErrNoTask) {
			if err == nil && woke.poll {
				// Found by a poll: more may have come unannounced.
				d.hub.pollOn(woke.cat)
			}
			return got, err
		}
		if d.hub.rest(w) {
			woke = w.again
			continue
		}
		select {
		case woke = <-w.c:
		case <-deadline.C:
			return none, ErrNoTask
		case <-ctx.Done():
			return none, context.Cause(ctx)
		}
	}
}

// deep returns f(), made aside (see package aside) when the caller may wait:
// a call to the stores grows a goroutine's stack past what its wait needs.
func deep[T any](wait time.Duration, f func() (T, error)) (T, error) {
	if wait <= 0 {
		return f()
	}
	return aside.Do(f)
}

// claim makes a new claim for c, or returns ErrNoTask.
//
// Round trips on the happy path: one ObtainAny and one claim batch; the
// candidates come from the pool, which one read fills for many claims.
// Concurrent claims in this process take distinct candidates, and ObtainAny
// skips candidates locked by other processes inside Redis, so competitors
// rarely meet on a row.
func (d *Dispatcher) claim(ctx context.Context, c Claimant, h *handover, reserved []tasks.Candidate) (claim *tasks.Claim, err error) {
	if len(c.Categories) == 0 {
		return nil, ErrNoTask
	}
	start := time.Now()
	ctx, span := d.tel.tracer.Start(ctx, "dispatcher.claim", trace.WithAttributes(claimerAttrs(c)...))
	var st claimStats
	defer func() {
		span.SetAttributes(attrCandidates.Int(st.candidates), attrTried.Int(st.tried),
			attrConflicts.Int(st.conflicts), attrRefused.Int(st.refused))
		var outcome string
		switch {
		case st.held:
			outcome = "held"
		case claim != nil:
			outcome = "claimed"
		case errors.Is(err, ErrNoTask):
			outcome = "none"
		case h != nil && h.err != nil:
			// The submit sent with the claim was refused or failed: the
			// submit's span and metrics say so, and nothing was claimed.
			outcome = "submit_failed"
		default:
			outcome = "error"
		}
		if claim != nil {
			span.SetAttributes(claimAttrs(claim)...)
		}
		span.SetAttributes(attrOutcome.String(outcome))
		d.tel.claimLatency.Record(ctx, sinceSeconds(start), metric.WithAttributes(attrOutcome.String(outcome)))
		if outcome == "claimed" {
			d.emit(ctx, claimEvent(claim, time.Since(start)))
		}
		d.recordClaim(ctx, st)
		endSpan(span, err)
	}()

	// tried holds the candidates this claim took, so that it does not take
	// them again, and those the claimant skipped.
	tried := make(map[int64]bool)
	var barred map[int64]int64
	if c.EditorID != 0 {
		barred = d.skips.fill(c.EditorID, time.Now(), tried)
	}
	if h != nil && h.submit != nil {
		// Not the task being submitted, should its claim have ended and the
		// task be back in the pool.
		tried[h.submit.TaskID] = true
	}
	// Under fair share, the editor's categories in the order it is due
	// them; with rate limits, those not closed, one at a time.
	cats, opt := c.queues(), takeOpts{barred: barred}
	if d.fair != nil && c.EditorID != 0 && len(cats) > 1 {
		cats, opt.ordered = d.fair.order(c.EditorID, cats), true
	}
	if d.limits != nil {
		opt.one = d.limits.limited(cats)
	}
	// Tasks sent back to the editor come first: those of the categories it
	// claims from now (the caller may leave one of the editor's out).
	var picked []pooled
	for _, r := range reserved {
		if slices.Contains(c.Categories, r.Category) {
			picked = append(picked, pooled{Candidate: r, category: r.Category, reserved: true})
			tried[r.ID] = true
		}
	}
	if len(picked) > 0 {
		st.candidates += len(picked)
		claim, err := d.claimPicked(ctx, c, picked, &st, h)
		if claim != nil || err != nil {
			return claim, err
		}
	}
	for range claimAttempts {
		open := cats
		if opt.one {
			open = d.limits.open(cats)
		}
		picked, err := d.cands.takeN(ctx, open, claimPick, tried, opt)
		if err != nil {
			return nil, Unavailable(fmt.Errorf("next: %w", err))
		}
		if len(picked) == 0 {
			return nil, ErrNoTask
		}
		st.candidates += len(picked)
		for _, p := range picked {
			tried[p.ID] = true
		}
		claim, err := d.claimPicked(ctx, c, picked, &st, h)
		if claim != nil && opt.ordered && !st.held {
			d.fair.charge(c.EditorID, claim.Task.Category, c.Categories)
		}
		if claim != nil || err != nil {
			return claim, err
		}
	}
	return nil, ErrNoTask
}

// claimPicked tries to claim one of picked in order: one ObtainAny over
// their locks, then the fenced claim in the store, and on a refused claim the
// next of them. Candidates it did not get to, or that the store refused only
// because the claimant skipped them, go back to the pool. It returns nil and
// no error when none could be claimed.
func (d *Dispatcher) claimPicked(ctx context.Context, c Claimant, picked []pooled, st *claimStats, h *handover) (*tasks.Claim, error) {
	var claimed []int64
	var back []pooled
	defer func() { d.candidatesDone(picked, claimed, back) }()
	for cands := picked; len(cands) > 0; {
		keys := make([]string, len(cands))
		for i, cand := range cands {
			keys[i] = d.lockKey(cand.ID)
		}
		// The category's rate limit, if it has one (all of cands are of
		// one category then). Refused, the category is closed, and the
		// claim looks at the others; cands leave the pool without waking
		// anyone, since nobody here may claim them until it reopens.
		if d.limits != nil {
			got, err := d.rateLimit(ctx, queueCategory(cands[0].category), 1)
			if err != nil {
				back = append(back, cands...)
				return nil, err
			}
			if got == 0 {
				return nil, nil
			}
		}
		opts := &locker.Options{Token: c.Holder}
		if h != nil && !h.done {
			opts.ReleaseFirst = []string{h.key}
		}
		lock, err := d.locks.ObtainAny(ctx, keys, d.cfg.Lease, opts)
		if h != nil && (err == nil || errors.Is(err, locker.ErrNotObtained) && ctx.Err() == nil) {
			h.done = true // Redis ran the script, release included
		}
		if errors.Is(err, locker.ErrNotObtained) {
			st.tried += len(keys)
			st.conflicts += len(keys)
			d.cands.contended(cands[0].category)
			if ctx.Err() != nil {
				return nil, context.Cause(ctx)
			}
			return nil, nil // all locked by other claims
		}
		if err != nil {
			back = append(back, cands...)
			return nil, fmt.Errorf("next: lock candidates: %w: %w", ErrUnavailable, err)
		}
		i := slices.Index(keys, lock.Key())
		st.tried += i + 1
		st.conflicts += i
		if i > 0 {
			d.cands.contended(cands[0].category)
		}
		cand := cands[i]
		cands = cands[i+1:]

		p := tasks.ClaimParams{
			TaskID: cand.ID, Fence: cand.Fence, Status: cand.Status,
			Holder: c.Holder, EditorID: c.EditorID, Lease: d.cfg.Lease,
			TraceContext: traceParent(ctx), Workflow: cand.Workflow, Capacity: c.Capacity,
			Category: queueCategory(cand.category), LimitKey: cand.LimitKey,
		}
		if ctx.Err() != nil {
			// The request ended: nobody would be answered with a claim.
			d.releaseLock(ctx, cand.ID, c.Holder)
			back = append(back, cand)
			back = append(back, cands...)
			return nil, context.Cause(ctx)
		}
		// Under a context that outlives ctx by a little (never past its
		// deadline), so that a claim made as ctx is cancelled is known, and
		// given back.
		sctx, settled := settling(ctx)
		sent := time.Now()
		var claim *tasks.Claim
		if h != nil && h.submit != nil {
			claim, err = d.handOver(sctx, h, p)
			settled()
			if h.err != nil {
				// The submit failed, and nothing was claimed.
				d.releaseLock(ctx, cand.ID, c.Holder)
				back = append(back, cand)
				back = append(back, cands...)
				return nil, h.err
			}
		} else {
			claim, err = d.store.Claim(sctx, p)
			settled()
		}
		if err == nil {
			claimed = []int64{cand.ID}
			back = append(back, cands...)
			if ctx.Err() != nil {
				// Made as the request ended, which will not answer with it.
				// A request past its deadline answers now: the claim is
				// given back aside, as a store that may not answer allows.
				// Stop waits for it (see asides).
				if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !d.asides.run(func() { d.giveBack(ctx, c, claim) }) {
					d.giveBack(ctx, c, claim)
				}
				return nil, context.Cause(ctx)
			}
			return claim, nil
		}
		d.releaseLock(ctx, cand.ID, c.Holder)
		switch {
		case errors.Is(err, tasks.ErrSkipped):
			// Others may take it: not this claimant, for a while.
			back = append(back, cand)
			d.skips.add(c.EditorID, cand.ID, time.Now(), skipMemoryFor)
		case errors.Is(err, tasks.ErrBarred):
			// Others may take it: not this claimant, while the bar lasts.
			back = append(back, cand)
			d.barred(c, cand, sent, err)
		case errors.Is(err, tasks.ErrPaused):
			// The category was paused after its candidates were read: read
			// them again, which leaves it out.
			d.cands.paused(cand.category)
		case errors.Is(err, tasks.ErrLimited):
			// The category (or the task's key) is at its limit in flight:
			// not stale, nothing to report. Its candidates are read again,
			// which leaves out what is at its limit.
			d.cands.paused(cand.category)
		case errors.Is(err, tasks.ErrStale), errors.Is(err, tasks.ErrNotFound):
			// The row moved on since it was read: another process claimed
			// it (or is writing it, or Redis had lost the lock of a live
			// claim), and the store refused. The category's other
			// candidates are likely as old (a replica may be behind):
			// read them again, from the primary.
			st.refused++
			d.cands.contended(cand.category)
			d.cands.stale(cand.category)
		case errors.Is(err, tasks.ErrEditorDisabled):
			back = append(back, cand)
			back = append(back, cands...)
			return nil, fmt.Errorf("next: %w", err)
		case errors.Is(err, tasks.ErrEditorBusy):
			back = append(back, cand)
			back = append(back, cands...)
			// A concurrent request of the same editor won: its claim is
			// the answer to this one too.
			held, herr := d.store.HeldByEditor(ctx, c.EditorID)
			switch {
			case errors.Is(herr, tasks.ErrNotFound):
				// That claim ended since (submitted, released, revoked by a
				// disable): this attempt got nothing, the next may.
				return nil, nil
			case herr != nil:
				return nil, Unavailable(fmt.Errorf("next: %w", herr))
			}
			st.held = true
			return held, nil
		default:
			back = append(back, cand)
			back = append(back, cands...)
			return nil, Unavailable(fmt.Errorf("next: claim task %d: %w", cand.ID, err))
		}
	}
	return nil, nil
}

// barred remembers that the store refused c's claim of cand with err, an
// ErrBarred (see skipMemory), from sent, when the claim was sent: a bar that
// a time ends (tasks.BarredError.For, counted from the claim's instant on the
// database's clock, which came after sent) is remembered to no later than
// its end, and a waiter of cand's category is woken then, since the task
// may be the claimant's now.
func (d *Dispatcher) barred(c Claimant, cand pooled, sent time.Time, err error) {
	var be *tasks.BarredError
	if !errors.As(err, &be) || be.For <= 0 {
		d.skips.bar(c.EditorID, cand.ID, cand.Fence, sent, skipMemoryFor)
		return
	}
	d.skips.bar(c.EditorID, cand.ID, cand.Fence, sent, be.For)
	if be.For < skipMemoryFor {
		time.AfterFunc(time.Until(sent.Add(be.For)), func() { d.hub.give(queueCategory(cand.category), 1) })
	}
}

// handOver sends h's submit to the store with the claim p, in one batch when
// p's task is pending, else before it. It returns the claim or why the store
// refused it, and sets h.ended or h.err.
func (d *Dispatcher) handOver(ctx context.Context, h *handover, p tasks.ClaimParams) (*tasks.Claim, error) {
	sp := *h.submit
	h.submit = nil
	if p.Status != tasks.StatusPending {
		if h.ended, h.err = d.store.Submit(ctx, sp); h.err != nil {
			return nil, h.err
		}
		return d.store.Claim(ctx, p)
	}
	ho, err := d.store.SubmitAndClaim(ctx, sp, p)
	if err != nil {
		h.err = err
		return nil, err
	}
	h.ended = ho.Ended
	return ho.Claim, ho.Refused
}

// claimStats are what one claim went through, for its span and metrics.
type claimStats struct {
	candidates int  // candidates read
	tried      int  // candidates whose lock was tried
	conflicts  int  // candidates found locked by a competitor
	refused    int  // claims the store refused after the lock was obtained
	held       bool // the claim is one a concurrent request made, not a new one
}

// claimEvent is the Event of a claim committed in latency.
func claimEvent(c *tasks.Claim, latency time.Duration) ClaimEvent {
	return ClaimEvent{Op: OpClaim, Category: c.Task.Category, Latency: latency, TookOver: c.TookOver, QueueWait: queueWait(c)}
}

// queueWait is how long c's task waited to be claimed: the store keeps in a
// claimed task's run_after the moment it became claimable, and assigned_at is
// the claim's, both on the database clock. Never negative.
func queueWait(c *tasks.Claim) time.Duration {
	return max(c.AssignedAt.Sub(c.Task.RunAfter), 0)
}

// recordClaim adds what a finished claim attempt went through (lock
// conflicts, refused claims) to the counters and metrics; the claim itself
// is counted by its Event.
func (d *Dispatcher) recordClaim(ctx context.Context, st claimStats) {
	if st.conflicts > 0 {
		d.stats.conflicts.Add(int64(st.conflicts))
		d.tel.conflicts.Add(ctx, int64(st.conflicts))
	}
	if st.refused > 0 {
		d.stats.refusedClaims.Add(int64(st.refused))
		d.tel.refusedClaims.Add(ctx, int64(st.refused))
	}
}

// candidatesDone ends a claim attempt in the candidate pool (see
// candidatePool.done) and treats the candidates it gave back as tasks that
// just arrived: a waiter of their category is woken for each. Waiters woken
// together can otherwise miss them: one that came back empty-handed while
// another held more candidates than it claimed rests, and the rest it gave
// back would wait for somebody's poll interval. Candidates the pool did not
// take back (their category was read while they were out) make the next
// look read again.
func (d *Dispatcher) candidatesDone(picked []pooled, claimed []int64, back []pooled) {
	put, missed := d.cands.done(picked, claimed, back)
	for cat, n := range put {
		d.hub.give(queueCategory(cat), n)
	}
	for cat, n := range missed {
		d.hub.wake(queueCategory(cat), n)
	}
}
