package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

var errRefused = errors.New("refused")

func isRefused(err error) bool { return errors.Is(err, errRefused) }

func TestKeepRenewsUntilContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var renewals atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- Keep(ctx, Renewal{
			Until: time.Now().Add(time.Hour),
			Every: time.Millisecond,
			Renew: func(context.Context) (time.Time, error) {
				if renewals.Add(1) == 5 {
					cancel()
				}
				return time.Now().Add(time.Hour), nil
			},
			Lost: isRefused,
		})
	}()
	if err := <-done; err != nil {
		t.Fatalf("Keep = %v after the context ended, want nil", err)
	}
	if n := renewals.Load(); n < 5 {
		t.Fatalf("%d renewals before the context ended, want 5", n)
	}
}

func TestKeepStopsAtRefusal(t *testing.T) {
	var renewals atomic.Int32
	err := Keep(context.Background(), Renewal{
		Until: time.Now().Add(time.Hour),
		Every: time.Millisecond,
		Renew: func(context.Context) (time.Time, error) {
			if renewals.Add(1) == 3 {
				return time.Time{}, errRefused
			}
			return time.Now().Add(time.Hour), nil
		},
		Lost: isRefused,
	})
	if !errors.Is(err, errRefused) {
		t.Fatalf("Keep = %v, want the refusal", err)
	}
	if n := renewals.Load(); n != 3 {
		t.Fatalf("%d renewals, want 3: Keep must stop at the refusal", n)
	}
}

// Transient failures are retried until the lease's end, and the renewal's
// context never outlives it.
func TestKeepExpiresWhileRenewalsFail(t *testing.T) {
	errDown := errors.New("connection refused")
	until := time.Now().Add(50 * time.Millisecond)
	var renewals atomic.Int32
	err := Keep(context.Background(), Renewal{
		Until: until,
		Every: 10 * time.Millisecond,
		Retry: time.Millisecond,
		Renew: func(ctx context.Context) (time.Time, error) {
			renewals.Add(1)
			if d, ok := ctx.Deadline(); !ok || d.After(until) {
				t.Errorf("renewal context deadline %v (set %v), want at most the lease's end %v", d, ok, until)
			}
			return time.Time{}, errDown
		},
		Lost: isRefused,
	})
	var expired *ExpiredError
	if !errors.As(err, &expired) {
		t.Fatalf("Keep = %v, want *ExpiredError", err)
	}
	if !expired.Until.Equal(until) || !errors.Is(err, errDown) {
		t.Fatalf("ExpiredError{Until: %v, Last: %v}, want Until %v and the last error", expired.Until, expired.Last, until)
	}
	if time.Now().Before(until) {
		t.Fatalf("Keep reported expiry before the lease's end")
	}
	if n := renewals.Load(); n < 2 {
		t.Fatalf("%d renewals, want transient failures retried", n)
	}
}

// A success after failures restores the normal interval and the new end.
func TestKeepRecoversAfterTransientFailures(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var renewals atomic.Int32
	done := make(chan error, 1)
	go func() {
		done <- Keep(ctx, Renewal{
			Until: time.Now().Add(time.Hour),
			Every: time.Millisecond,
			Renew: func(context.Context) (time.Time, error) {
				switch n := renewals.Add(1); {
				case n <= 3:
					return time.Time{}, errors.New("timeout")
				case n == 6:
					cancel()
				}
				return time.Now().Add(time.Hour), nil
			},
			Lost: isRefused,
		})
	}()
	if err := <-done; err != nil {
		t.Fatalf("Keep = %v, want nil: transient errors must not end the lease", err)
	}
}
