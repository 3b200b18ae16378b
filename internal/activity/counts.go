package activity

import (
	"sync"
	"time"

	"github.com/taskd/taskd/dispatcher"
)

// LatencyBounds are the upper bounds of the fixed buckets a Recorder counts
// claims' latencies in: the dispatcher's ClaimLatencyBounds, which its
// taskd.claim.duration histogram uses too, so that the history's quantiles
// and the metrics' agree. One more bucket counts the claims that took longer
// than the last bound. Every replica counts in the same buckets, so their
// counts add up.
var LatencyBounds = dispatcher.ClaimLatencyBounds

// LatencyBuckets is the number of latency buckets: one per bound in
// LatencyBounds, and one for longer.
const LatencyBuckets = len(LatencyBounds) + 1

// Counts are what a Recorder counts in a minute: claims committed, submits
// committed, and the claims by how long they took.
type Counts struct {
	Claims  int64
	Submits int64
	// Latency counts claims by the time the claim that got them took (from
	// the start of the attempt to the committed claim: not the time a long
	// poll waited for a task to arrive). Latency[i] counts those up to
	// LatencyBounds[i] (and over the bound before); the last, those over the
	// last bound.
	Latency [LatencyBuckets]int64
}

// Add adds o's counts to c.
func (c *Counts) Add(o Counts) {
	c.Claims += o.Claims
	c.Submits += o.Submits
	for i, n := range o.Latency {
		c.Latency[i] += n
	}
}

// Measured is how many claims the latency buckets hold.
func (c *Counts) Measured() int64 {
	var n int64
	for _, v := range c.Latency {
		n += v
	}
	return n
}

// Quantile estimates the q-quantile (0 < q ≤ 1) of the claims' latency from
// the buckets, interpolating linearly inside the bucket that holds it, as
// Prometheus's histogram_quantile does; a quantile in the last bucket, past
// the last bound, is reported as the last bound. It returns false when no
// claim was measured.
func (c *Counts) Quantile(q float64) (time.Duration, bool) {
	total := c.Measured()
	if total == 0 || q <= 0 || q > 1 {
		return 0, false
	}
	rank := q * float64(total)
	var below int64
	for i, n := range c.Latency {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		if i == len(LatencyBounds) {
			return LatencyBounds[len(LatencyBounds)-1], true
		}
		var lower time.Duration
		if i > 0 {
			lower = LatencyBounds[i-1]
		}
		upper := LatencyBounds[i]
		return lower + time.Duration(float64(upper-lower)*(rank-float64(below))/float64(n)), true
	}
	return LatencyBounds[len(LatencyBounds)-1], true
}

// bucketOf returns the latency bucket of d.
func bucketOf(d time.Duration) int {
	for i, b := range LatencyBounds {
		if d <= b {
			return i
		}
	}
	return len(LatencyBounds)
}

// activity is what this process counted per minute and has not written to
// Redis yet. Recording is a map update under a mutex: no I/O on the claim
// path.
type activity struct {
	now func() time.Time

	mu      sync.Mutex
	pending map[int64]*Counts // by Unix minute
}

func newActivity(now func() time.Time) *activity {
	return &activity{now: now, pending: make(map[int64]*Counts)}
}

// minute returns the counts of the current minute; a.mu is held.
func (a *activity) minute() *Counts {
	m := a.now().Unix() / 60
	c := a.pending[m]
	if c == nil {
		c = new(Counts)
		a.pending[m] = c
	}
	return c
}

// claimed counts a claim that took latency.
func (a *activity) claimed(latency time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.minute()
	c.Claims++
	c.Latency[bucketOf(latency)]++
}

// submitted counts a committed submit.
func (a *activity) submitted() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.minute().Submits++
}

// take returns the pending counts and starts afresh.
func (a *activity) take() map[int64]*Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.pending
	a.pending = make(map[int64]*Counts, 2)
	return p
}

// restore puts back counts a flush could not write, to go with the next
// flush, dropping minutes before oldest (Unix minute): past the retention,
// there is no point writing them.
func (a *activity) restore(p map[int64]*Counts, oldest int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for m, c := range p {
		if m < oldest {
			continue
		}
		if cur := a.pending[m]; cur != nil {
			cur.Add(*c)
		} else {
			a.pending[m] = c
		}
	}
}
