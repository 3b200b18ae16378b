package chaos

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// phase is a stretch of the run with one fault (or none): the counters of
// every request answered in it.
type phase struct {
	name      string
	start     time.Time
	recovered atomic.Int64 // unix nanos when the fault was undone; 0 before
	end       time.Time

	requests, ok, unavailable, missingRetryAfter, serverErrors  atomic.Int64
	transportErrors, timedOut                                   atomic.Int64
	assignments, submits, stale, releases, abandons, heartbeats atomic.Int64
	firstOK                                                     atomic.Int64 // unix nanos of the first 2xx answered after recovered
	violations                                                  atomic.Int64

	// Set by the fault's own goroutine, read once the run is over.
	failover map[string]int64 // replica -> ms from the fault to its first write that succeeded
	rejoin   string           // how a restarted Galera node caught up: IST or SST
	rejoinMS int64            // from its start until it was synced
	notes    []string
}

func (p *phase) markRecovered() { p.recovered.Store(time.Now().UnixNano()) }

// recovery is when the fault was undone, or the zero time.
func (p *phase) recovery() time.Time {
	if n := p.recovered.Load(); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// recorder holds the phases and the violations of a run.
type recorder struct {
	cur    atomic.Pointer[phase]
	mu     sync.Mutex
	phases []*phase
	viols  []Violation
	logf   func(string, ...any)
}

// Violation is a broken promise found by the run.
type Violation struct {
	Phase string `json:"phase"`
	Check string `json:"check"`
	What  string `json:"what"`
}

func (v Violation) String() string { return fmt.Sprintf("[%s] %s: %s", v.Phase, v.Check, v.What) }

// begin ends the current phase and starts a new one.
func (r *recorder) begin(name string) *phase {
	p := &phase{name: name, start: time.Now()}
	r.mu.Lock()
	if n := len(r.phases); n > 0 && r.phases[n-1].end.IsZero() {
		r.phases[n-1].end = p.start
	}
	r.phases = append(r.phases, p)
	r.mu.Unlock()
	r.cur.Store(p)
	return p
}

func (r *recorder) finish() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.phases); n > 0 && r.phases[n-1].end.IsZero() {
		r.phases[n-1].end = time.Now()
	}
}

func (r *recorder) phase() *phase { return r.cur.Load() }

// violate records a violation in phase p (the current one when nil).
func (r *recorder) violate(p *phase, check, format string, args ...any) {
	if p == nil {
		p = r.phase()
	}
	name := "checks"
	if p != nil {
		p.violations.Add(1)
		name = p.name
	}
	v := Violation{Phase: name, Check: check, What: fmt.Sprintf(format, args...)}
	r.mu.Lock()
	r.viols = append(r.viols, v)
	n := len(r.viols)
	r.mu.Unlock()
	if n <= 50 && r.logf != nil {
		r.logf("VIOLATION %s", v)
	}
}

// observe counts resp in the current phase and checks what every answer
// must satisfy: no 5xx but 503, 503 with Retry-After, an answer within the
// bound. It returns the phase.
func (r *recorder) observe(what string, resp response) *phase {
	p := r.phase()
	p.requests.Add(1)
	switch {
	case resp.timedOut:
		p.timedOut.Add(1)
		r.violate(p, "bounded answer", "%s: no answer within %v", what, resp.answered.Sub(resp.started).Round(time.Millisecond))
	case resp.err != nil:
		p.transportErrors.Add(1)
	case resp.status == 503:
		p.unavailable.Add(1)
		if resp.retryAfter == "" {
			p.missingRetryAfter.Add(1)
			r.violate(p, "503 with Retry-After", "%s: 503 without Retry-After", what)
		}
	case resp.status >= 500:
		p.serverErrors.Add(1)
		r.violate(p, "no 5xx but 503", "%s: %d %s", what, resp.status, trimBody(resp.body))
	case resp.ok():
		p.ok.Add(1)
		if rec := p.recovered.Load(); rec != 0 && resp.answered.UnixNano() >= rec {
			p.firstOK.CompareAndSwap(0, resp.answered.UnixNano())
		}
	}
	return p
}

func trimBody(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
