// Package lease keeps a time-limited claim alive. It renews the claim at a
// fixed interval, retries a renewal that failed for a transient reason sooner,
// and reports the moment the claim is known to be lost: the owner refused a
// renewal, or the claim's deadline passed while renewals kept failing.
//
// The locker's Lock.KeepAlive and the worker's heartbeat both run on Keep, so
// a Redis lock and a MySQL lease are renewed by the same rules.
package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/taskd/taskd/internal/backoff"
)

// Renewal describes one claim to keep alive.
type Renewal struct {
	// Until is when the claim currently ends.
	Until time.Time
	// Every is the interval between successful renewals; a third of the
	// lease leaves room for two failed attempts.
	Every time.Duration
	// Retry is the mean delay before retrying a renewal that failed with a
	// transient error; each delay is jittered. Zero means Every/4.
	Retry time.Duration
	// Renew renews the claim and returns its new end. Its context ends at
	// the current Until: a renewal that answers later cannot be trusted.
	Renew func(ctx context.Context) (time.Time, error)
	// Lost reports whether an error from Renew means the claim is gone for
	// good (refused, not merely unreachable). Keep stops at such an error.
	Lost func(error) bool
}

// ExpiredError is returned by Keep when the claim's end passed without a
// successful renewal.
type ExpiredError struct {
	Until time.Time
	Last  error // the last renewal error, if any
}

func (e *ExpiredError) Error() string {
	msg := "lease ended at " + e.Until.Format(time.RFC3339Nano) + " without a renewal"
	if e.Last != nil {
		msg += fmt.Sprintf(" (last error: %v)", e.Last)
	}
	return msg
}

func (e *ExpiredError) Unwrap() error { return e.Last }

// Keep renews the claim until ctx ends, then returns nil. It returns early,
// with the reason, when the claim is lost: the error from Renew for which
// Lost reported true, or an *ExpiredError.
func Keep(ctx context.Context, r Renewal) error {
	every := max(r.Every, time.Millisecond)
	retry := r.Retry
	if retry <= 0 {
		retry = every / 4
	}
	retry = max(retry, time.Millisecond)
	until := r.Until
	var last error
	timer := time.NewTimer(every)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
		if !time.Now().Before(until) {
			return &ExpiredError{Until: until, Last: last}
		}
		rctx, cancel := context.WithDeadline(ctx, until)
		next, err := r.Renew(rctx)
		cancel()
		switch {
		case err == nil:
			until, last = next, nil
			timer.Reset(every)
		case ctx.Err() != nil:
			return nil
		case r.Lost != nil && r.Lost(err):
			return err
		default:
			last = err
			timer.Reset(min(backoff.Spread(retry), max(time.Until(until), 0)))
		}
	}
}
