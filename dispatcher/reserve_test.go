package dispatcher

import (
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

func cands(ids ...int64) []tasks.Candidate {
	out := make([]tasks.Candidate, len(ids))
	for i, id := range ids {
		out[i] = tasks.Candidate{ID: id}
	}
	return out
}

func ids(cs []tasks.Candidate) []int64 {
	out := make([]int64, len(cs))
	for i, c := range cs {
		out[i] = c.ID
	}
	return out
}

func equal(got []int64, want ...int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestReservationsKeepConcurrentClaimsApart(t *testing.T) {
	r := newReservations()
	read := time.Now()
	now := read.Add(time.Millisecond)
	list := cands(1, 2, 3, 4, 5, 6, 7)

	a, rest, _ := r.take(list, 3, read, now)
	if !equal(ids(a), 1, 2, 3) || len(rest) != 4 {
		t.Fatalf("first take = %v, rest %v; want 1 2 3 and four left", ids(a), ids(rest))
	}
	// A second claim with the same list gets the next ones.
	if b, _, _ := r.take(list, 3, read, now); !equal(ids(b), 4, 5, 6) {
		t.Fatalf("second take = %v, want 4 5 6", ids(b))
	}
	// The first claim got task 2: 1 and 3 are free again, and a list read
	// before the claim returned does not offer 2.
	claimedAt := now.Add(time.Millisecond)
	r.release(a, 2, claimedAt)
	if c, _, _ := r.take(list, 3, read, claimedAt); !equal(ids(c), 1, 3, 7) {
		t.Fatalf("take from an old list = %v, want 1 3 7", ids(c))
	}
	// A list read after the claim returned that still has 2 means 2 is
	// claimable again (released, or its lease passed).
	if d, _, _ := r.take(list, 3, claimedAt.Add(time.Millisecond), claimedAt.Add(2*time.Millisecond)); !equal(ids(d), 2) {
		t.Fatalf("take from a new list = %v, want 2", ids(d))
	}
	// With everything left in flight elsewhere, take reserves nothing and
	// says which are busy.
	if f, _, busy := r.take(cands(4, 5, 6), 3, now, now); len(f) != 0 || !equal(ids(busy), 4, 5, 6) {
		t.Fatalf("take of busy candidates = %v, busy %v; want none, busy 4 5 6", ids(f), ids(busy))
	}
	// In-flight reservations lapse.
	later := now.Add(reserveAttempt + time.Second)
	if e, _, _ := r.take(list, 7, later, later); len(e) != 7 {
		t.Fatalf("after the reservations lapsed take gave %v, want all 7", ids(e))
	}
}
