package chaos

import (
	"testing"
	"time"
)

// timed builds an audit trail of events at given milliseconds after t0.
type timed struct{ events []event }

func (h *timed) at(ms int, kind string, task, fence, editor int64) *timed {
	h.events = append(h.events, event{ID: int64(len(h.events) + 1), TaskID: task, Kind: kind, Fence: fence, EditorID: editor,
		At: t0.Add(time.Duration(ms) * time.Millisecond)})
	return h
}

// inFlight runs checkInFlight on the trail's claims for category "lim" with
// the limit, under a lease of 2s; tasks 1..9 are of "lim", 10.. of "other".
func (h *timed) inFlight(limit int, beats ...beat) (int64, int, []finding) {
	tasks := make(map[int64]taskRow)
	for id := int64(1); id < 20; id++ {
		cat := "lim"
		if id >= 10 {
			cat = "other"
		}
		tasks[id] = taskRow{category: cat}
	}
	tr := auditTrail(h.events, tasks, nil, true, 2*time.Second)
	applyBeats(tr.claims, beats, 2*time.Second, 0)
	return checkInFlight(tr.claims, tasks, "lim", limit, 2*time.Second)
}

func TestCheckInFlightFindsMoreClaimsLiveThanTheLimit(t *testing.T) {
	t.Parallel()
	// Three claims of lim overlap (by three editors through any process);
	// the limit is 2. One stretch above it, from the third claim until the
	// first end.
	over := (&timed{}).
		at(0, "claimed", 1, 1, 7).at(10, "claimed", 2, 1, 8).at(20, "claimed", 3, 1, 9).
		at(30, "submitted", 1, 1, 7).at(40, "submitted", 2, 1, 8).at(50, "submitted", 3, 1, 9)
	n, most, fs := over.inFlight(2)
	if n != 3 || most != 3 {
		t.Errorf("checked %d claims, at most %d live; want 3 and 3", n, most)
	}
	wantFindings(t, "three live, limit 2", fs, 1, inFlightCheck, "lim (max_in_flight 2): 3 claims live at once",
		"from 2026-01-02T03:04:05.02Z until 03:04:05.030", "task 1 fence 1 (editor 7", "task 3 fence 1 (editor 9")

	// Two stretches above the limit, each a finding; the peak of the second
	// is 4.
	twice := (&timed{}).
		at(0, "claimed", 1, 1, 7).at(1, "claimed", 2, 1, 8).at(2, "claimed", 3, 1, 9).at(3, "released", 3, 1, 9).
		at(4, "claimed", 4, 1, 5).at(5, "claimed", 5, 1, 6).at(6, "submitted", 1, 1, 7).at(7, "submitted", 2, 1, 8).
		at(8, "submitted", 4, 1, 5).at(9, "submitted", 5, 1, 6)
	_, most, fs = twice.inFlight(2)
	if most != 4 {
		t.Errorf("at most %d live, want 4", most)
	}
	if len(fs) != 2 {
		t.Fatalf("%d findings %v, want 2", len(fs), fs)
	}
	wantFindings(t, "second stretch", fs[1:], 1, inFlightCheck, "4 claims live at once")

	// A claim with no end counts until its lease's end, and a worker's
	// (editor 0), whose heartbeats the trail does not show, until its end
	// event: both beside two later claims are three.
	open := (&timed{}).at(0, "claimed", 1, 1, 7).at(100, "claimed", 2, 1, 0).
		at(2500, "claimed", 3, 1, 8).at(2600, "claimed", 4, 1, 9).
		at(2700, "submitted", 3, 1, 8).at(2800, "submitted", 4, 1, 9).at(5000, "submitted", 2, 1, 0)
	_, _, fs = open.inFlight(2)
	wantFindings(t, "a worker's claim lives until its end", fs, 1, inFlightCheck, "3 claims live at once", "task 2 fence 1 (editor 0")
	open.at(1900, "claimed", 5, 1, 6) // out of order: the trail is read in time order
	_, _, fs = open.inFlight(2)
	wantFindings(t, "an unended claim until its lease end", fs, 2, inFlightCheck, "claims live at once")

	// A heartbeat's lease keeps a claim live past its claim's lease, until
	// its end event (the sweep's, later).
	beaten := (&timed{}).at(0, "claimed", 1, 1, 7).at(3000, "claimed", 2, 1, 8).at(3100, "claimed", 3, 1, 9).
		at(3200, "submitted", 2, 1, 8).at(3300, "submitted", 3, 1, 9).at(4500, "expired", 1, 1, 7)
	_, _, fs = beaten.inFlight(2, beat1(1500))
	wantFindings(t, "extended by a heartbeat", fs, 1, inFlightCheck, "3 claims live at once", "task 1 fence 1")
	// A heartbeat with no answer may have extended it as well.
	_, _, fs = beaten.inFlight(2, beat{ref: claimRef{1, 1}, unsure: t0.Add(1500 * time.Millisecond)})
	wantFindings(t, "maybe extended by a heartbeat", fs, 1, inFlightCheck, "3 claims live at once")
}

// beat1 is a heartbeat's answer for task 1 fence 1: the lease from ms on.
func beat1(ms int) beat {
	return beat{ref: claimRef{1, 1}, leaseEnd: t0.Add(time.Duration(ms)*time.Millisecond + 2*time.Second)}
}

func TestCheckInFlightPassesClaimsWithinTheLimit(t *testing.T) {
	t.Parallel()
	// Two at a time of lim, however many of another category beside them;
	// each claim after an end.
	ok := (&timed{}).
		at(0, "claimed", 1, 1, 7).at(1, "claimed", 2, 1, 8).
		at(2, "claimed", 10, 1, 9).at(3, "claimed", 11, 1, 5).at(4, "claimed", 12, 1, 6).
		at(5, "submitted", 1, 1, 7).at(6, "claimed", 3, 1, 7).
		at(7, "released", 2, 1, 8).at(8, "claimed", 2, 2, 9).
		at(9, "submitted", 3, 1, 7).at(10, "submitted", 2, 2, 9)
	n, most, fs := ok.inFlight(2)
	wantFindings(t, "within the limit", fs, 0, "")
	if n != 4 || most != 2 {
		t.Errorf("checked %d claims, at most %d live; want 4 and 2", n, most)
	}

	// An abandoned claim is live until its lease's end, not until the sweep
	// wrote its expiry: a claim after the lease's end is beside one other.
	abandoned := (&timed{}).at(0, "claimed", 1, 1, 7).at(100, "claimed", 2, 1, 8).
		at(2000, "claimed", 3, 1, 9).at(2100, "submitted", 3, 1, 9).at(2200, "submitted", 2, 1, 8).at(3000, "expired", 1, 1, 7)
	// A cancel of a running task ends its claim.
	cancelled := (&timed{}).at(0, "claimed", 1, 1, 0).at(100, "claimed", 2, 1, 8).at(200, "cancelled", 1, 1, 0).
		at(300, "claimed", 3, 1, 9).at(400, "submitted", 2, 1, 8).at(500, "submitted", 3, 1, 9)
	_, _, fs = cancelled.inFlight(2)
	wantFindings(t, "cancelled", fs, 0, "")

	_, most, fs = abandoned.inFlight(2)
	wantFindings(t, "lease ended before the sweep", fs, 0, "")
	if most != 2 {
		t.Errorf("at most %d live, want 2", most)
	}
	_, _, fs = abandoned.inFlight(1)
	wantFindings(t, "limit 1", fs, 2, inFlightCheck, "2 claims live at once")
}

func TestCheckInFlightSameMillisecond(t *testing.T) {
	t.Parallel()
	// An end and a claim in the same millisecond: the end comes first, in
	// either order of the trail (a takeover writes both in one statement).
	for _, endFirst := range []bool{true, false} {
		h := (&timed{}).at(0, "claimed", 1, 1, 7).at(1, "claimed", 2, 1, 8)
		if endFirst {
			h.at(5, "submitted", 1, 1, 7).at(5, "claimed", 3, 1, 9)
		} else {
			h.at(5, "claimed", 3, 1, 9).at(5, "submitted", 1, 1, 7)
		}
		h.at(6, "submitted", 2, 1, 8).at(7, "submitted", 3, 1, 9)
		_, most, fs := h.inFlight(2)
		wantFindings(t, "end and claim in one millisecond", fs, 0, "")
		if most != 2 {
			t.Errorf("end first %v: at most %d live, want 2", endFirst, most)
		}
	}

	// A claim that ended in the millisecond it began was live in it, beside
	// the claims that millisecond began.
	h := (&timed{}).at(0, "claimed", 1, 1, 7).at(5, "claimed", 2, 1, 8).at(5, "claimed", 3, 1, 9).at(5, "released", 2, 1, 8).
		at(6, "submitted", 1, 1, 7).at(7, "submitted", 3, 1, 9)
	_, most, fs := h.inFlight(2)
	if most != 3 {
		t.Errorf("at most %d live, want 3", most)
	}
	wantFindings(t, "a claim of no length", fs, 1, inFlightCheck, "3 claims live at once", "task 2 fence 1")
}
