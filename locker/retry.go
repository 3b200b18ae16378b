package locker

import (
	"time"

	"github.com/taskd/taskd/internal/backoff"
)

// RetryStrategy decides how long an obtain, or a Refresh, waits before its
// next attempt.
// NextBackoff is called with the number of attempts made so far (1 after the
// first failure) and returns the delay, or a value <= 0 to stop retrying.
// Strategies are stateless, so one value may be shared by concurrent calls.
type RetryStrategy interface {
	NextBackoff(attempt int) time.Duration
}

type retryFunc func(attempt int) time.Duration

func (f retryFunc) NextBackoff(attempt int) time.Duration { return f(attempt) }

// NoRetry makes a single attempt. It is the default.
func NoRetry() RetryStrategy {
	return retryFunc(func(int) time.Duration { return 0 })
}

// LinearBackoff retries forever (or until the context ends) every d.
func LinearBackoff(d time.Duration) RetryStrategy {
	return retryFunc(func(int) time.Duration { return d })
}

// ExponentialBackoff retries forever (or until the context ends), doubling the
// delay from min up to max. Each delay is drawn uniformly from [d/2, d) ("equal
// jitter") so that competing callers spread out instead of retrying in step.
func ExponentialBackoff(min, max time.Duration) RetryStrategy {
	if min <= 0 {
		min = time.Millisecond
	}
	if max < min {
		max = min
	}
	return retryFunc(func(attempt int) time.Duration {
		return backoff.EqualJitter(backoff.Exponential(min, max, attempt))
	})
}

// LimitRetry stops s after max retries (max+1 attempts in all).
func LimitRetry(s RetryStrategy, max int) RetryStrategy {
	return retryFunc(func(attempt int) time.Duration {
		if attempt > max {
			return 0
		}
		return s.NextBackoff(attempt)
	})
}
