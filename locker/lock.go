package locker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/taskd/taskd/internal/lease"
)

// Lock is a lock obtained from a Client, on one key or, from ObtainMulti, on
// several held as one. Its methods are safe for concurrent use.
//
// A nil *Lock, which is what a failed obtain returns, is a lock that is not
// held: Release, Refresh and TTL return ErrNotHeld, Key and Token return "",
// Keys returns nil, Validity returns 0, and KeepAlive returns a context that
// is already cancelled with ErrNotHeld as its cause. So
//
//	lock, err := lc.Obtain(ctx, key, ttl, nil)
//	defer lock.Release(ctx)
//	if err != nil { ... }
//
// is safe.
type Lock struct {
	client *Client
	keys   []string // one or more, distinct; on a Cluster all in one hash slot
	token  string

	mu sync.Mutex
	// until is when the lock's validity ends on the local monotonic clock:
	// the start of the last successful obtain or refresh, plus the time to
	// live, minus the drift allowance. It is zero for a handle from
	// Client.Lock until its first successful Refresh (validity unknown), and
	// in the past once the lock was released or found lost.
	until time.Time
}

// Key returns the locked key; for a lock on several keys, the first. It
// returns "" for a nil lock.
func (l *Lock) Key() string {
	if l == nil {
		return ""
	}
	return l.keys[0]
}

// Keys returns the locked keys in the order they were given: one for
// Obtain, ObtainAny and Client.Lock, all of them for ObtainMulti. It returns
// nil for a nil lock.
func (l *Lock) Keys() []string {
	if l == nil {
		return nil
	}
	return slices.Clone(l.keys)
}

// Token returns the token stored in the lock's keys, or "" for a nil lock.
func (l *Lock) Token() string {
	if l == nil {
		return ""
	}
	return l.token
}

// Validity returns how much longer the lock is guaranteed to be held, as far
// as this process can tell: the time to live given at the last successful
// Obtain or Refresh, minus the time that call took and the clock drift
// allowance (ttl*0.01 + 2ms), minus the time since. It is 0 once that has run
// out or the lock was released, and for a nil lock.
func (l *Lock) Validity() time.Duration {
	if l == nil {
		return 0
	}
	return max(time.Until(l.validUntil()), 0)
}

func (l *Lock) validUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until
}

func (l *Lock) setUntil(t time.Time) {
	l.mu.Lock()
	l.until = t
	l.mu.Unlock()
}

// end records that the lock is no longer held: its validity ends now.
func (l *Lock) end() { l.setUntil(time.Now()) }

// name names the lock in errors: its key, or all its keys.
func (l *Lock) name() string {
	if len(l.keys) == 1 {
		return strconv.Quote(l.keys[0])
	}
	return fmt.Sprintf("%q", l.keys)
}

// TTL returns the lock's remaining time to live in Redis (for several keys,
// the least of theirs), or 0 when the lock is no longer held, which for
// several keys means that some key is missing or holds another token. With
// Redlock it is the time until fewer than a quorum of masters hold it. One
// script per Redis. A nil lock returns 0 and ErrNotHeld.
func (l *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if l == nil {
		return 0, ErrNotHeld
	}
	c := l.client
	var ttls []time.Duration
	var errs []error
	for _, r := range c.each(ctx, c.nodeTimeout, func(ctx context.Context, _ int, n *node) (int, error) {
		ttl, err := n.pttl(ctx, l.keys, l.token)
		return int(ttl / time.Millisecond), err
	}) {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.val >= 0:
			ttls = append(ttls, time.Duration(r.val)*time.Millisecond)
		}
	}
	if len(ttls) >= c.quorum {
		slices.Sort(ttls)
		slices.Reverse(ttls)
		return ttls[c.quorum-1], nil
	}
	if err := c.decisive(len(ttls), errs); err != nil {
		return 0, fmt.Errorf("locker: ttl %s: %w", l.name(), err)
	}
	return 0, nil
}

// Refresh extends the lock to ttl from now if it is still held: every key of
// it, atomically, in one script per Redis. It returns ErrNotHeld when the lock
// expired, was released or belongs to another token (for several keys: when
// any key does, and then no key is extended); a lost lock is never created
// again. With Redlock a quorum must extend it. A nil lock returns ErrNotHeld.
//
// opt.RetryStrategy (default NoRetry, a single attempt) retries transient
// Redis errors, as Obtain does: connection refused, timeouts, LOADING,
// failover. ErrNotHeld and other errors are returned at once. Retries wait
// as the strategy says and never start after the lock's validity has ended
// (a handle from Client.Lock that was never refreshed has no known validity:
// the strategy and ctx alone bound it). When retries stop, the last error is
// returned; when ctx ends first, it is joined with the context's cause. An
// error other than ErrNotHeld leaves the lock as it was: it may still be
// held until its validity runs out. opt.Token is ignored.
func (l *Lock) Refresh(ctx context.Context, ttl time.Duration, opt *Options) error {
	if l == nil {
		return ErrNotHeld
	}
	if ttl < MinTTL {
		return fmt.Errorf("locker: refresh %s: ttl must be at least %v, got %v", l.name(), MinTTL, ttl)
	}
	retry := opt.retryStrategy()
	var timer *time.Timer
	for attempt := 1; ; attempt++ {
		err := l.refresh(ctx, ttl)
		if err == nil || errors.Is(err, ErrNotHeld) || !isTransient(err) {
			return err
		}
		backoff := retry.NextBackoff(attempt)
		if backoff <= 0 {
			return err
		}
		if ctx.Err() != nil {
			return withCause(ctx, err)
		}
		if until := l.validUntil(); !until.IsZero() && !time.Now().Add(backoff).Before(until) {
			return fmt.Errorf("%w (not retried: the lock's validity ends first)", err)
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < backoff {
			return errors.Join(err, context.DeadlineExceeded)
		}
		if timer == nil {
			timer = time.NewTimer(backoff)
			defer timer.Stop()
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
			return withCause(ctx, err)
		case <-timer.C:
		}
	}
}

// withCause joins err with the cause of ctx's end, unless err is that cause.
func withCause(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	if errors.Is(err, cause) {
		return err
	}
	return errors.Join(err, cause)
}

// refresh makes one attempt at Refresh.
func (l *Lock) refresh(ctx context.Context, ttl time.Duration) error {
	c := l.client
	start := time.Now()
	results := c.each(ctx, min(c.nodeTimeout, ttl/3), func(ctx context.Context, _ int, n *node) (int, error) {
		ok, err := n.refresh(ctx, l.keys, l.token, ttl)
		if ok {
			return 1, err
		}
		return 0, err
	})
	var ok int
	var errs []error
	for _, r := range results {
		if r.err != nil {
			errs = append(errs, r.err)
		} else {
			ok += r.val
		}
	}
	if ok >= c.quorum {
		l.setUntil(start.Add(ttl - drift(ttl)))
		return nil
	}
	if err := c.decisive(ok, errs); err != nil {
		return fmt.Errorf("locker: refresh %s: %w", l.name(), err)
	}
	l.end()
	if ok > 0 {
		// A minority extended a lock the quorum lost; free it for others.
		c.undo(ctx, l.keys, l.token)
	}
	return ErrNotHeld
}

// Release gives the lock back: it deletes every key of it that still holds
// its token, in one script per Redis. It returns ErrNotHeld when the lock had
// already expired or belongs to another token (for several keys: when any
// key does; the others are deleted all the same); another holder's key is
// never deleted. With Redlock a quorum of masters must have held it. A nil
// lock returns ErrNotHeld.
func (l *Lock) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	c := l.client
	var released int
	var errs []error
	for _, r := range c.each(ctx, c.nodeTimeout, func(ctx context.Context, _ int, n *node) (int, error) {
		return n.release(ctx, l.keys, l.token)
	}) {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.val == len(l.keys):
			released++
		}
	}
	if released >= c.quorum {
		l.end()
		return nil
	}
	if err := c.decisive(released, errs); err != nil {
		return fmt.Errorf("locker: release %s: %w", l.name(), err)
	}
	l.end()
	return ErrNotHeld
}

// KeepAlive refreshes the lock to ttl every ttl/3 until the returned stop
// function is called or ctx ends, and returns a context derived from ctx that
// is cancelled, with a cause that matches ErrNotHeld, the moment the lock is
// known to be lost: Refresh returned ErrNotHeld, or Refresh kept failing with
// transient errors until the lock's validity ran out. Run the work guarded by
// the lock under that context. For a nil lock the context is cancelled
// already, with ErrNotHeld as its cause.
//
// stop ends the renewals and waits for an ongoing one to finish, so that a
// Release after stop cannot race with a refresh; it also cancels the
// returned context. It is safe to call stop more than once.
func (l *Lock) KeepAlive(ctx context.Context, ttl time.Duration) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if l == nil {
		cancel(ErrNotHeld)
		return ctx, func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := lease.Keep(ctx, lease.Renewal{
			Until: l.validUntil(),
			Every: ttl / 3,
			Retry: ttl/12 + time.Millisecond,
			Renew: func(ctx context.Context) (time.Time, error) {
				if err := l.refresh(ctx, ttl); err != nil {
					return time.Time{}, err
				}
				return l.validUntil(), nil
			},
			Lost: func(err error) bool { return errors.Is(err, ErrNotHeld) },
		})
		var expired *lease.ExpiredError
		switch {
		case errors.As(err, &expired):
			cancel(fmt.Errorf("%w: validity ran out while refresh failed: %w", ErrNotHeld, err))
		case err != nil:
			cancel(err)
		}
	}()
	var once sync.Once
	return ctx, func() {
		once.Do(func() {
			cancel(context.Canceled)
			<-done
		})
	}
}
