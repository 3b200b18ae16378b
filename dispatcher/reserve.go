package dispatcher

import (
	"sync"
	"time"

	"github.com/taskd/taskd/tasks"
)

// reservations keep concurrent claims in one process off each other's
// candidates. A claim reserves the few candidates it is about to lock, and
// others pass over them until it is done with them. A task it claimed is
// also passed over by candidate lists read before the claim returned, which
// may show it as still claimable; a list read afterwards that shows it means
// it really is claimable again (released, or its lease passed). Without this,
// claimants that read candidates at the same moment all try the same rows and
// meet in Redis. Claims of other processes are kept apart by the locks.
type reservations struct {
	mu      sync.Mutex
	entries map[int64]reservation
	calls   int
}

type reservation struct {
	until     time.Time // reserved by a claim in flight until then
	claimedAt time.Time // claimed by this process then
}

const (
	// reservePick is how many candidates one attempt reserves and tries:
	// more than one, so that a candidate another process holds costs no
	// extra round trip.
	reservePick = 2
	// reserveAttempt bounds a reservation while its claim is in flight.
	reserveAttempt = 10 * time.Second
	// reserveClaimed is how long a claim is remembered: far longer than a
	// candidate list is used for.
	reserveClaimed = 5 * time.Second
	// reservePrune is how many calls pass between sweeps of lapsed entries.
	reservePrune = 256
)

func newReservations() *reservations {
	return &reservations{entries: make(map[int64]reservation)}
}

// take reserves up to n of cands, in order, from a candidate list whose
// read started at readAt, and returns them with the rest of cands after the
// last one it looked at. When it reserves none, busy lists the candidates
// that other claims of this process have in flight: some of those may not
// end in a claim.
func (r *reservations) take(cands []tasks.Candidate, n int, readAt, now time.Time) (picked, rest, busy []tasks.Candidate) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls%reservePrune == 0 {
		for id, e := range r.entries {
			if !now.Before(e.until) && now.Sub(e.claimedAt) > reserveClaimed {
				delete(r.entries, id)
			}
		}
	}
	i := 0
	for ; i < len(cands) && len(picked) < n; i++ {
		c := cands[i]
		e := r.entries[c.ID]
		switch {
		case now.Before(e.until):
			busy = append(busy, c)
			continue
		case !e.claimedAt.Before(readAt):
			continue // claimed after this list was read
		}
		e.until = now.Add(reserveAttempt)
		r.entries[c.ID] = e
		picked = append(picked, c)
	}
	if len(picked) > 0 {
		busy = nil
	}
	return picked, cands[i:], busy
}

// release ends the reservations of cands; claimed, if not 0, is the one of
// them that was claimed, at now.
func (r *reservations) release(cands []tasks.Candidate, claimed int64, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range cands {
		if c.ID == claimed {
			r.entries[c.ID] = reservation{claimedAt: now}
		} else {
			delete(r.entries, c.ID)
		}
	}
}
