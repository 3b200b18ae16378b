package dispatcher

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/metric"

	"github.com/taskd/taskd/tasks"
)

var (
	//go:embed ratelimit.lua
	rateLimitLua    string
	rateLimitScript = redis.NewScript(rateLimitLua)
)

// rateLimit is one category's rate limit: claims spaced interval apart on
// average, up to burst at once after an idle time (see Config.RateLimits).
type rateLimit struct {
	key      string // the category's Redis key
	interval time.Duration
	burst    int
}

// newRateLimit returns the rate limit of perMinute claims a minute (> 0):
// an interval of a minute over perMinute, rounded up to the microsecond,
// and a burst of a second's worth, at least one.
func newRateLimit(key string, perMinute int) rateLimit {
	us := (time.Minute.Microseconds() + int64(perMinute) - 1) / int64(perMinute)
	return rateLimit{key: key, interval: time.Duration(us) * time.Microsecond, burst: (perMinute + 59) / 60}
}

// rateLimiter keeps the categories' rate limits: the count in Redis, shared
// by every process, and which categories this process holds closed.
//
// A category whose limit refused a claim, or whose last claim took its last
// token, is closed in this process until the limit's next token: its
// claims do not ask Redis, and takes leave it out. When it reopens, one
// caller long-polling for it is woken (reopen), as if a task had arrived;
// the chain goes on, a token at a time, while claims take them.
type rateLimiter struct {
	client redis.Scripter
	limits map[string]rateLimit // by category; read-only
	reopen func(cat string)

	mu     sync.Mutex
	closed map[string]*closure
}

// closure is a category closed until a time.
type closure struct {
	until time.Time
	timer *time.Timer
}

// newRateLimiter returns the limiter of the categories of workflows that
// have a rate limit, counted in client under prefix, or nil when none has.
func newRateLimiter(client redis.Scripter, prefix string, workflows map[string]tasks.Workflow, reopen func(string)) *rateLimiter {
	var limits map[string]rateLimit
	for cat, w := range workflows {
		if w.RateLimit > 0 {
			if limits == nil {
				limits = make(map[string]rateLimit)
			}
			limits[cat] = newRateLimit(prefix+"rate:"+cat, w.RateLimit)
		}
	}
	if limits == nil {
		return nil
	}
	return &rateLimiter{client: client, limits: limits, reopen: reopen, closed: make(map[string]*closure)}
}

// limited reports whether any of cats has a rate limit.
func (r *rateLimiter) limited(cats []string) bool {
	for _, cat := range cats {
		if _, ok := r.limits[queueCategory(cat)]; ok {
			return true
		}
	}
	return false
}

// open returns cats without the categories closed now: cats itself when
// none is.
func (r *rateLimiter) open(cats []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.closed) == 0 {
		return cats
	}
	now := time.Now()
	var out []string
	shut := false
	for i, cat := range cats {
		if c := r.closed[queueCategory(cat)]; c != nil && now.Before(c.until) {
			if !shut {
				shut = true
				out = append(make([]string, 0, len(cats)-1), cats[:i]...)
			}
			continue
		}
		if shut {
			out = append(out, cat)
		}
	}
	if !shut {
		return cats
	}
	return out
}

// take takes up to n claims of cat's limit in Redis (one round trip) and
// returns how many it got: n for a category without a limit, without a
// round trip. When the limit has no more now, the category is closed until
// its next claim.
func (r *rateLimiter) take(ctx context.Context, cat string, n int) (int, error) {
	lim, ok := r.limits[cat]
	if !ok {
		return n, nil
	}
	res, err := rateLimitScript.Run(ctx, r.client, []string{lim.key},
		lim.interval.Microseconds(), lim.burst, n).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		return 0, fmt.Errorf("rate limit of category %q: %w", cat, err)
	}
	if wait := time.Duration(res[1]) * time.Microsecond; wait > 0 {
		r.close(cat, wait)
	}
	return int(res[0]), nil
}

// close closes cat for wait, or until its current closure ends if later.
func (r *rateLimiter) close(cat string, wait time.Duration) {
	until := time.Now().Add(wait)
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.closed[cat]
	if c == nil {
		c = &closure{}
		r.closed[cat] = c
	}
	if until.After(c.until) {
		c.until = until
	}
	if c.timer == nil {
		c.timer = time.AfterFunc(wait, func() { r.fire(cat) })
	}
}

// fire ends cat's closure when its time has come, and wakes a caller
// waiting for it; else it waits for the rest.
func (r *rateLimiter) fire(cat string) {
	r.mu.Lock()
	c := r.closed[cat]
	if c == nil {
		r.mu.Unlock()
		return
	}
	if rest := time.Until(c.until); rest > 0 {
		c.timer.Reset(rest)
		r.mu.Unlock()
		return
	}
	delete(r.closed, cat)
	r.mu.Unlock()
	r.reopen(cat)
}

// rateLimit takes up to n claims of cat's rate limit for a claim about to
// be made, as rateLimiter.take, and counts a refusal. Without rate limits
// it returns n at once.
func (d *Dispatcher) rateLimit(ctx context.Context, cat string, n int) (int, error) {
	if d.limits == nil {
		return n, nil
	}
	got, err := d.limits.take(ctx, cat, n)
	if err != nil {
		if ctx.Err() != nil {
			return 0, context.Cause(ctx)
		}
		return 0, fmt.Errorf("next: %w: %w", ErrUnavailable, err)
	}
	if got < n {
		d.stats.rateLimited.Add(int64(n - got))
		d.tel.rateLimited.Add(ctx, int64(n-got), metric.WithAttributes(attrCategory.String(cat)))
	}
	return got, nil
}
