package telemetry

import (
	"context"
	"sync"
	"time"
)

// cached holds the last answer of fetch for the gauges' callbacks: metrics
// may be collected often (every scrape of every Prometheus), and the reads
// behind them (pool statistics, webhook backlog, store pings) should not
// follow that rate. It is safe for concurrent use.
type cached[T any] struct {
	fetch   func(ctx context.Context) (T, error)
	every   time.Duration    // how long one answer is reused
	timeout time.Duration    // bounds each fetch
	now     func() time.Time // the clock; time.Now unless a test sets it

	mu  sync.Mutex
	at  time.Time // when the last fetch started; zero before the first
	val T
	err error
}

// get returns the last answer, fetching a new one first when it is older than
// every.
func (c *cached[T]) get(ctx context.Context) (T, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now
	if c.now != nil {
		now = c.now
	}
	if t := now(); c.at.IsZero() || t.Sub(c.at) >= c.every {
		c.at = t
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		c.val, c.err = c.fetch(ctx)
		cancel()
	}
	return c.val, c.err
}
