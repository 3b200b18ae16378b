package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

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
// the context's error when ctx ends first. Errors from an unreachable store
// wrap ErrUnavailable.
func (d *Dispatcher) Next(ctx context.Context, c Claimant, wait time.Duration) (*tasks.Claim, error) {
	if c.Holder == "" {
		return nil, fmt.Errorf("next: %w: empty holder", tasks.ErrInvalid)
	}
	if c.EditorID != 0 {
		held, err := d.store.HeldByEditor(ctx, c.EditorID)
		if err == nil {
			return held, nil
		}
		if !errors.Is(err, tasks.ErrNotFound) {
			return nil, storeErr(err)
		}
	}
	wait = min(wait, d.cfg.MaxWait)
	if wait <= 0 {
		return d.claim(ctx, c)
	}

	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		// Subscribe first, so that a task arriving while claim looks is not
		// missed.
		w := d.hub.subscribe(c.Categories)
		claim, err := d.claim(ctx, c)
		if !errors.Is(err, ErrNoTask) {
			d.hub.unsubscribe(w)
			return claim, err
		}
		poll.Reset(jitter(d.cfg.PollInterval))
		select {
		case <-w.c:
		case <-poll.C:
		case <-deadline.C:
			d.hub.unsubscribe(w)
			return nil, ErrNoTask
		case <-ctx.Done():
			d.hub.unsubscribe(w)
			return nil, context.Cause(ctx)
		}
		d.hub.unsubscribe(w)
	}
}

// claim makes a new claim for c, or returns ErrNoTask.
//
// Round trips on the happy path: one candidate read, one ObtainAny, one
// claim transaction. Concurrent claims in this process start at different
// offsets of the batch, and ObtainAny skips candidates locked by other
// processes inside Redis, so competitors rarely meet on a row.
func (d *Dispatcher) claim(ctx context.Context, c Claimant) (*tasks.Claim, error) {
	if len(c.Categories) == 0 {
		return nil, ErrNoTask
	}
	inflight := d.inflight.Add(1)
	defer d.inflight.Add(-1)
	limit := min(d.cfg.Batch+int(inflight)-1, tasks.CandidatesLimitMax)
	opts := &locker.Options{Token: c.Holder}

	for range claimRounds {
		cands, err := d.store.Candidates(ctx, tasks.CandidatesParams{
			Categories: c.Categories, EditorID: c.EditorID, Limit: limit,
		})
		if err != nil {
			return nil, storeErr(fmt.Errorf("next: %w", err))
		}
		if len(cands) == 0 {
			return nil, ErrNoTask
		}
		// Alone, a claimant tries the best candidate first; concurrent
		// claimants each start somewhere else.
		if off := int(d.ticket.Add(1) % inflight); off > 0 && len(cands) > 1 {
			off %= len(cands)
			cands = slices.Concat(cands[off:], cands[:off])
		}

		for len(cands) > 0 {
			keys := make([]string, len(cands))
			for i, cand := range cands {
				keys[i] = d.lockKey(cand.ID)
			}
			lock, err := d.locks.ObtainAny(ctx, keys, d.cfg.Lease, opts)
			if errors.Is(err, locker.ErrNotObtained) {
				d.Counters.Conflicts.Add(int64(len(keys)))
				if ctx.Err() != nil {
					return nil, context.Cause(ctx)
				}
				break // all taken: read a fresh batch
			}
			if err != nil {
				return nil, fmt.Errorf("next: lock candidates: %w: %w", ErrUnavailable, err)
			}
			i := slices.Index(keys, lock.Key())
			d.Counters.Conflicts.Add(int64(i))

			claim, err := d.store.Claim(ctx, tasks.ClaimParams{
				TaskID: cands[i].ID, Fence: cands[i].Fence,
				Holder: c.Holder, EditorID: c.EditorID, Lease: d.cfg.Lease,
			})
			if err == nil {
				d.Counters.Assignments.Add(1)
				return claim, nil
			}
			d.releaseLock(ctx, cands[i].ID, c.Holder)
			switch {
			case errors.Is(err, tasks.ErrStale):
				// The row moved on since it was read (or Redis had lost
				// the lock of a live claim): the fence refused it.
				d.Counters.RefusedClaims.Add(1)
				cands = cands[i+1:]
			case errors.Is(err, tasks.ErrEditorBusy):
				// A concurrent request of the same editor won: its claim is
				// the answer to this one too.
				held, herr := d.store.HeldByEditor(ctx, c.EditorID)
				if herr != nil {
					return nil, storeErr(fmt.Errorf("next: %w", herr))
				}
				return held, nil
			case errors.Is(err, tasks.ErrNotFound):
				cands = cands[i+1:]
			default:
				return nil, storeErr(fmt.Errorf("next: claim task %d: %w", cands[i].ID, err))
			}
		}
	}
	return nil, ErrNoTask
}

// jitter draws a duration uniformly from [d/2, 3d/2), so that waiters that
// started together do not poll together.
func jitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + rand.N(d)
}
