package dispatcher

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/taskd/taskd/tasks"
)

// candidateClaimedFor is how long the pool remembers a claim it handed out
// the candidate for: far longer than a candidate read takes.
const candidateClaimedFor = 5 * time.Second

// candidateContendedFor is how long a category counts as contended after a
// claim of this process met a competitor's on one of its candidates.
const candidateContendedFor = 5 * time.Second

// candidateSpread is how many of a contended category's best candidates of
// equal priority a take chooses among at random.
const candidateSpread = 8

// candidatePerWaiter is how many candidates a read sized by its demand reads
// for each claim that waited for the read before it: a take hands out up to
// claimPick while plenty are left.
const candidatePerWaiter = claimPick

// candidateMaxAge is how long a category's candidates are handed out before
// they are read again. Tasks added or given back through any dispatcher that
// shares the wake-up channel make them stale at once; this bounds how late a
// task that became claimable otherwise (a retry's backoff passing, a lease
// running out) is seen by priority.
const candidateMaxAge = time.Second

// candidatePool keeps, per category, the claimable tasks read last, best
// first, and hands them out to this process's claims: one candidate read
// serves many claims, and concurrent claims get distinct candidates instead
// of meeting on the same rows. Claims in other processes are kept apart by
// the Redis locks. A candidate is only a hint: the store's fenced claim
// decides.
type candidatePool struct {
	read candidateRead
	// readPrimary, when set, reads from the primary database even when the
	// store reads candidates from a replica: after a refused claim showed a
	// category's candidates stale, since the replica may be behind.
	readPrimary candidateRead
	limit       int // candidates per read
	clock       func() time.Time

	mu   sync.Mutex
	cats map[string]*categoryCandidates
	// stageQueues are the keys in cats of the queues of one stage of each
	// category (see queueParts), which the category's invalidations reach.
	stageQueues map[string][]string
	// out holds the candidates handed out: the zero time while their claim
	// is in flight, the time the claim was made once it was. A read that
	// started before a claim was made may show the task as claimable still,
	// so a read leaves out what is in flight or was claimed since it began.
	out   map[int64]time.Time
	takes int // counts takes, to prune out now and then
}

// categoryCandidates are one category's candidates.
type categoryCandidates struct {
	cands  []tasks.Candidate // best first
	gen    uint64            // counts reads; handed-out candidates carry it
	readAt time.Time         // zero: stale
	// reading is open while a read is in flight; claims that need the
	// category wait for it rather than read too. waiting counts them.
	reading chan struct{}
	waiting int
	// demand is how many claims waited for the last read when it came
	// back: the next read is sized for as many (see fill).
	demand  int
	err     error // of the last read
	more    bool  // the last read may have left claimable tasks unread
	primary bool  // the next read goes to the primary (see stale)
	// recheck says the next read is to decide afresh (see stale and
	// paused); recheckGen is the gen of the last such read: candidates
	// handed out before it do not go back into the pool (see done).
	recheck    bool
	recheckGen uint64
	inflight   int // candidates handed out whose claim has not ended
	// epoch counts invalidations: a read during which one happened leaves
	// readAt zero, since it may have missed what made it.
	epoch uint64
	// contendedUntil: until then, other processes claim from this category
	// too, and takes spread over its best candidates instead of all trying
	// the first (they read the same rows in the same order).
	contendedUntil time.Time
}

// pooled is a candidate handed out by the pool.
type pooled struct {
	tasks.Candidate
	category string
	gen      uint64
	// reserved: a task reserved for the claimant (tasks.EditorClaims), which
	// it claims first, not one of the pool's.
	reserved bool
}

// candidateRead reads up to limit candidates of a category (a queue: see
// queueParts) for a claim that first ends ending claims of its own
// (tasks.CandidatesParams.Ending).
type candidateRead func(ctx context.Context, category string, limit, ending int) ([]tasks.Candidate, error)

func newCandidatePool(limit int, read candidateRead) *candidatePool {
	return &candidatePool{
		read: read, limit: limit, clock: time.Now,
		cats: make(map[string]*categoryCandidates), out: make(map[int64]time.Time), stageQueues: make(map[string][]string),
	}
}

// take hands out up to n of the best candidates of categories (highest
// priority, then earliest due, then oldest), leaving out ids in skip, and reads the categories
// that have none or whose candidates are stale. It returns none when the
// categories have nothing claimable. It hands out more than one only while
// plenty are left, so that a claim does not hold candidates that concurrent
// claims would find missing. In a contended category it takes one of the
// oldest few of the best priority and due time at random.
func (p *candidatePool) take(ctx context.Context, categories []string, n int, skip map[int64]bool) ([]pooled, error) {
	return p.takeN(ctx, categories, n, skip, takeOpts{})
}

// takeMany is take for a worker's batch of claims, one per free slot: it
// hands out up to n however few are left, since the claims of the batch are
// made together.
func (p *candidatePool) takeMany(ctx context.Context, categories []string, n int, skip map[int64]bool) ([]pooled, error) {
	return p.takeN(ctx, categories, n, skip, takeOpts{many: true})
}

// takeOpts say how takeN chooses among categories; the zero value is take's
// choice.
type takeOpts struct {
	// many: a worker's batch (see takeMany).
	many bool
	// ordered: categories are in the order the claim prefers them (an
	// editor's fair share): the take is from the first that has a
	// candidate, and from it alone.
	ordered bool
	// one: the take is from one category, the first candidate's, whose rate
	// limit the claim then takes.
	one bool
	// barred are tasks barred to the claimant, each at the fence it had
	// when the store refused it: left out while they still have it.
	barred map[int64]int64
	// ending: the claim ends as many claims of its own first, in its
	// transaction (see tasks.CandidatesParams.Ending); a read it makes
	// counts on their room.
	ending int
}

// leftOut are the candidates a take leaves out: ids the claim tried or its
// claimant skipped, and tasks barred to the claimant at their fence.
type leftOut struct {
	ids    map[int64]bool
	barred map[int64]int64
}

func (l leftOut) has(c tasks.Candidate) bool {
	if l.ids[c.ID] {
		return true
	}
	f, ok := l.barred[c.ID]
	return ok && f == c.Fence
}

func (l leftOut) size() int { return len(l.ids) + len(l.barred) }

// takeN is take, or takeMany, as opt says.
func (p *candidatePool) takeN(ctx context.Context, categories []string, n int, skip map[int64]bool, opt takeOpts) ([]pooled, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out0 := leftOut{ids: skip, barred: opt.barred}
	many := opt.many
	want := 1
	if many {
		want = n
	}
	for _, cat := range categories {
		if err := p.fill(ctx, cat, out0, want, opt.ending); err != nil {
			return nil, err
		}
	}
	var out []pooled
	for len(out) < n {
		var best *categoryCandidates
		var bestCat string
		bestAt := -1
		for _, cat := range categories {
			if (opt.ordered || opt.one) && len(out) > 0 && cat != out[0].category {
				continue
			}
			cc := p.cats[cat]
			i := slices.IndexFunc(cc.cands, func(c tasks.Candidate) bool { return !out0.has(c) })
			if i >= 0 && (best == nil || better(cc.cands[i], best.cands[bestAt])) {
				best, bestCat, bestAt = cc, cat, i
				if opt.ordered {
					break
				}
			}
		}
		if best == nil || (!many && len(out) > 0 && len(best.cands) <= p.limit/4) {
			break
		}
		if p.clock().Before(best.contendedUntil) {
			bestAt = spread(best.cands, bestAt, out0)
		}
		out = append(out, pooled{Candidate: best.cands[bestAt], category: bestCat, gen: best.gen})
		p.out[best.cands[bestAt].ID] = time.Time{}
		best.inflight++
		best.cands = slices.Delete(best.cands, bestAt, bestAt+1)
	}
	if p.takes++; p.takes%256 == 0 {
		now := p.clock()
		for id, at := range p.out {
			if !at.IsZero() && now.Sub(at) > candidateClaimedFor {
				delete(p.out, id)
			}
		}
	}
	return out, nil
}

// fill makes sure cat has fresh candidates other than those in skip, want of
// them when the store may have that many, reading them unless another claim
// is reading them already. p.mu is held, and is let go while reading or
// waiting.
func (p *candidatePool) fill(ctx context.Context, cat string, skip leftOut, want, ending int) error {
	cc := p.cats[cat]
	if cc == nil {
		cc = &categoryCandidates{}
		p.cats[cat] = cc
		if category, stage := queueParts(cat); stage != "" {
			p.stageQueues[category] = append(p.stageQueues[category], cat)
		}
	}
	usable := func() bool {
		n := 0
		for _, c := range cc.cands {
			if !skip.has(c) {
				if n++; n >= want {
					return true
				}
			}
		}
		return n > 0 && !cc.more
	}
	for waited := false; ; {
		if ch := cc.reading; ch != nil {
			// Another claim is reading: what it finds is fresh enough.
			cc.waiting++
			p.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
			}
			p.mu.Lock()
			cc.waiting--
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if errors.Is(cc.err, context.Canceled) || errors.Is(cc.err, context.DeadlineExceeded) {
				// The reader's own request ended (its client left, its time
				// ran out, its long poll was replaced), not this one: look
				// again, and read if need be.
				continue
			}
			if cc.err != nil {
				return cc.err
			}
			waited = true
			continue
		}
		if usable() && (waited || (!cc.readAt.IsZero() && p.clock().Sub(cc.readAt) < candidateMaxAge)) {
			return nil
		}
		if waited && !cc.more && !cc.readAt.IsZero() {
			// The read just made found all there is, and others took it.
			// (It leaves readAt zero when tasks arrived while it ran, since
			// it may have missed them: then read again.)
			return nil
		}
		break
	}
	ch := make(chan struct{})
	cc.reading = ch
	epoch := cc.epoch
	start := p.clock()
	// The candidates in flight still read as claimable until their claims
	// commit, and are left out, as are those in skip: read past them. When
	// many claims waited for the last read (thousands of long polls woken
	// together), this one reads for as many, each of which may take
	// candidatePerWaiter: one read then serves them all, instead of a Batch
	// at a time while the rest wait their turn.
	limit := min(max(p.limit, want, cc.demand*candidatePerWaiter)+cc.inflight+skip.size(), tasks.CandidatesLimitMax)
	read := p.read
	if cc.primary && p.readPrimary != nil {
		read = p.readPrimary
	}
	cc.primary = false
	recheck := cc.recheck
	cc.recheck = false
	p.mu.Unlock()
	cands, err := read(ctx, cat, limit, ending)
	p.mu.Lock()
	cc.reading = nil
	cc.demand = cc.waiting
	close(ch)
	cc.err = err
	if err != nil {
		return err
	}
	cc.more = len(cands) >= limit
	cc.cands = slices.DeleteFunc(cands, func(c tasks.Candidate) bool {
		at, ok := p.out[c.ID]
		return ok && (at.IsZero() || !at.Before(start))
	})
	cc.gen++
	if recheck {
		cc.recheckGen = cc.gen
	}
	cc.readAt = time.Time{}
	if cc.epoch == epoch {
		cc.readAt = p.clock()
	}
	return nil
}

// done ends the claim attempt that took picked. claimed are the candidates
// it claimed, if any. back are the candidates it did not claim but
// that are still claimable as far as it knows (not tried, or refused for
// reasons of the claimant's own): they go back to the pool. A read made
// while they were out left them out only because they were in flight, so
// they go into it too, unless it was a read to decide afresh (after a
// refused claim showed the category's candidates stale, or the category
// paused): that read decides. It returns, by category,
// how many of back went back to the pool (put) and how many did not
// (missed): only a new read finds those.
//
// Thousands of long polls woken together keep the category's reads going:
// each claim gives back the second candidate it took, and were those given
// back after a read always missed, each would wake a waiter and read the
// category again, a read of hundreds of rows every few claims.
func (p *candidatePool) done(picked []pooled, claimed []int64, back []pooled) (put, missed map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range picked {
		if c.reserved {
			continue
		}
		if cc := p.cats[c.category]; cc != nil && cc.inflight > 0 {
			cc.inflight--
		}
		if slices.Contains(claimed, c.ID) {
			p.out[c.ID] = p.clock()
		} else {
			delete(p.out, c.ID)
		}
	}
	count := func(m *map[string]int, cat string) {
		if *m == nil {
			*m = make(map[string]int)
		}
		(*m)[cat]++
	}
	for _, c := range back {
		if c.reserved {
			continue
		}
		cc := p.cats[c.category]
		if cc == nil || c.gen < cc.recheckGen {
			count(&missed, c.category)
			continue
		}
		if slices.ContainsFunc(cc.cands, func(x tasks.Candidate) bool { return x.ID == c.ID }) {
			continue
		}
		i, _ := slices.BinarySearchFunc(cc.cands, c.Candidate, func(a, b tasks.Candidate) int {
			if better(a, b) {
				return -1
			}
			return 1
		})
		cc.cands = slices.Insert(cc.cands, i, c.Candidate)
		count(&put, c.category)
	}
	return put, missed
}

// contended notes that a claim met a competitor's on a candidate of cat.
func (p *candidatePool) contended(cat string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cc := p.cats[cat]; cc != nil {
		cc.contendedUntil = p.clock().Add(candidateContendedFor)
	}
}

// spread picks at random one of the first candidateSpread candidates from
// cands[i] on that are not in skip and have cands[i]'s priority and due time
// (tasks with distinct due times keep their order).
func spread(cands []tasks.Candidate, i int, skip leftOut) int {
	choices := []int{i}
	for j := i + 1; j < len(cands) && len(choices) < candidateSpread &&
		cands[j].Priority == cands[i].Priority && cands[j].Due.Equal(cands[i].Due); j++ {
		if !skip.has(cands[j]) {
			choices = append(choices, j)
		}
	}
	return choices[rand.IntN(len(choices))]
}

// invalidate makes cat's candidates stale: the next claim reads them again.
func (p *candidatePool) invalidate(cat string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cc := p.cats[cat]; cc != nil {
		cc.readAt = time.Time{}
		cc.epoch++
	}
	for _, key := range p.stageQueues[cat] {
		cc := p.cats[key]
		cc.readAt = time.Time{}
		cc.epoch++
	}
}

// stale notes that a claim of one of cat's candidates was refused because
// the row had moved on: the next claim reads the category again, from the
// primary, so that a replica that lags cannot hand out the same stale rows
// over and over. The read after that goes to the replica again.
func (p *candidatePool) stale(cat string) { p.recheck(cat, true) }

// paused notes that a claim of one of cat's candidates was refused because
// the category was paused after they were read: the next claim reads them
// again, which leaves the category out.
func (p *candidatePool) paused(cat string) { p.recheck(cat, false) }

// recheck makes the next claim of cat read its candidates again (from the
// primary when primary is set) to decide afresh: candidates handed out
// before that read do not go back into the pool (see done).
func (p *candidatePool) recheck(cat string, primary bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if cc := p.cats[cat]; cc != nil {
		cc.readAt = time.Time{}
		cc.primary = cc.primary || primary
		cc.recheck = true
		cc.epoch++
	}
}

// better orders candidates as the store does: higher priority first, then
// earlier due time (tasks without one last), then lower id.
func better(a, b tasks.Candidate) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.Due.Equal(b.Due) {
		return a.Due.Before(b.Due)
	}
	return a.ID < b.ID
}
