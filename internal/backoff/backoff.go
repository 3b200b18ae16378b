// Package backoff computes the delays of retries and periodic work, so that
// the locker's retries, the worker's retries and pauses, and the dispatcher's
// polls share one shape: exponential growth with jitter, so that callers that
// failed together do not retry together.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Exponential returns base·2^(attempt-1), capped at max; attempts below 1
// count as 1. It returns 0 when base or max is not positive.
func Exponential(base, max time.Duration, attempt int) time.Duration {
	if base <= 0 || max <= 0 {
		return 0
	}
	d := min(base, max)
	for i := 1; i < attempt && d < max; i++ {
		d *= 2
	}
	return min(d, max)
}

// EqualJitter draws a duration uniformly from [d/2, d): never longer than d,
// never shorter than half of it.
func EqualJitter(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half)
}

// Spread draws a duration uniformly from [d/2, 3d/2): d on average, for
// periodic work that should not run in step with its peers.
func Spread(d time.Duration) time.Duration {
	if d < 2 {
		return d
	}
	return d/2 + rand.N(d)
}
