package dispatcher

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

// idleWaiters subscribes n waiters of cats whose first look came back
// empty, oldest first.
func idleWaiters(t *testing.T, h *hub, n int, cats ...string) []*waiter {
	t.Helper()
	ws := make([]*waiter, n)
	for i := range ws {
		ws[i] = h.subscribe(cats)
		if h.rest(ws[i]) {
			t.Fatalf("waiter %d: told to look again with nothing owed", i)
		}
	}
	return ws
}

// woken returns the indexes of the waiters holding a wake-up, taking it.
func woken(ws []*waiter) []int {
	var out []int
	for i, w := range ws {
		select {
		case <-w.c:
			out = append(out, i)
		default:
		}
	}
	return out
}

func TestHubWakesAsManyAsTasksOldestFirst(t *testing.T) {
	var arrived []string
	h := newHub(func(cat string) { arrived = append(arrived, cat) })
	ws := idleWaiters(t, h, 5, "news")
	h.wake("news", 2)
	if got := woken(ws); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("woken %v, want the two oldest [0 1]", got)
	}
	h.wake("sports", 3) // nobody waits for it
	h.wake("news", 2)
	if got := woken(ws); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("woken %v, want the next two [2 3]", got)
	}
	if !slices.Equal(arrived, []string{"news", "sports", "news"}) {
		t.Fatalf("arrived told of %v", arrived)
	}
}

// An empty-handed look does not cost a waiter its place: woken again, the
// oldest goes first.
func TestHubWaiterKeepsItsPlace(t *testing.T) {
	h := newHub(nil)
	ws := idleWaiters(t, h, 4, "news")
	h.wake("news", 2)
	woken(ws)
	// The younger of the two comes back first; both go back before 2 and 3.
	for _, i := range []int{1, 0} {
		if h.rest(ws[i]) {
			t.Fatalf("waiter %d told to look again", i)
		}
	}
	for want := range 4 {
		h.wake("news", 1)
		if got := woken(ws); !slices.Equal(got, []int{want}) {
			t.Fatalf("wake-up %d went to %v, want [%d]", want, got, want)
		}
	}
}

// A wake-up that finds every waiter busy looking is owed to them: a look
// that may have begun before the task arrived is made again.
func TestHubOwesWakeUpsToBusyWaiters(t *testing.T) {
	h := newHub(nil)
	a := h.subscribe([]string{"news"}) // looking
	b := h.subscribe([]string{"news"}) // looking
	h.wake("news", 5)                  // more than there are waiters
	if !h.rest(a) || !h.rest(b) {
		t.Fatal("a busy waiter's empty look was not made again after a wake-up")
	}
	if h.rest(a) || h.rest(b) {
		t.Fatal("more looks owed than there are waiters")
	}
	if got := woken([]*waiter{a, b}); got != nil {
		t.Fatalf("idle waiters hold wake-ups %v", got)
	}
}

// A waiter that leaves with a wake-up it did not act on (its request ended
// as the task arrived) passes it to the next waiter.
func TestHubLeavingWaiterPassesItsWakeUpOn(t *testing.T) {
	h := newHub(nil)
	ws := idleWaiters(t, h, 3, "news")
	h.wake("news", 1)
	h.leave(ws[0]) // without reading its wake-up
	if got := woken(ws); !slices.Equal(got, []int{1}) {
		t.Fatalf("woken %v, want the wake-up passed to [1]", got)
	}
	// A waiter that leaves idle or after acting on its wake-up passes
	// nothing on.
	h.leave(ws[1])
	if got := woken(ws); got != nil {
		t.Fatalf("woken %v after a waiter left with nothing to pass", got)
	}
	// A busy waiter leaving takes its owed look with it.
	c := h.subscribe([]string{"news"})
	h.wake("news", 2) // wakes ws[2], owes one to c
	h.leave(c)
	if got := woken(ws); !slices.Equal(got, []int{2}) {
		t.Fatalf("woken %v, want [2]", got)
	}
	h.rest(ws[2]) // may look once more: looks are owed to the busy, not to one of them
	if h.rest(ws[2]) {
		t.Fatal("more looks owed than busy waiters")
	}
	h.leave(ws[2])
	if h.waiting() != 0 {
		t.Fatal("waiting with every waiter gone")
	}
}

func TestHubWaiterOfSeveralCategories(t *testing.T) {
	h := newHub(nil)
	both := idleWaiters(t, h, 1, "news", "sports")[0]
	news := idleWaiters(t, h, 1, "news")[0]
	h.wake("sports", 1)
	if got := woken([]*waiter{both, news}); !slices.Equal(got, []int{0}) {
		t.Fatalf("woken %v, want the waiter of both", got)
	}
	// Busy, it is out of the news queue too: news wakes the other one.
	h.wake("news", 1)
	if got := woken([]*waiter{both, news}); !slices.Equal(got, []int{1}) {
		t.Fatalf("woken %v, want the news waiter", got)
	}
	h.wake("sports", 1) // owed to the busy waiter of both
	if !h.rest(both) {
		t.Fatal("the owed look was not made")
	}
	h.leave(both)
	h.leave(news)
	if h.waiting() != 0 {
		t.Fatal("waiting with every waiter gone")
	}
}

// Waiters come back in any order and keep their age order in the queue.
func TestHubQueueKeepsAgeOrder(t *testing.T) {
	h := newHub(nil)
	const n = 50
	ws := idleWaiters(t, h, n, "news")
	h.wake("news", n)
	woken(ws)
	for _, i := range []int{7, 3, 49, 0, 25, 24, 26, 1, 48, 10} {
		h.rest(ws[i])
	}
	var got []int
	for range 10 {
		h.wake("news", 1)
		got = append(got, woken(ws)...)
	}
	if want := []int{0, 1, 3, 7, 10, 24, 25, 26, 48, 49}; !slices.Equal(got, want) {
		t.Fatalf("woken in order %v, want %v", got, want)
	}
}

// A candidate read during which tasks arrived does not stand for the
// claims that waited for it: they read again.
func TestCandidatePoolReadsAgainAfterAnArrivalDuringTheRead(t *testing.T) {
	var reads atomic.Int64
	reading := make(chan struct{})
	finish := make(chan struct{})
	read := func(ctx context.Context, _ string, _, _ int) ([]tasks.Candidate, error) {
		if reads.Add(1) == 1 {
			close(reading)
			<-finish
			return nil, nil // looked before the task arrived
		}
		return cands(0, 1), nil
	}
	p := newCandidatePool(8, read)
	first := make(chan error, 1)
	go func() {
		_, err := p.take(context.Background(), []string{"news"}, 1, nil)
		first <- err
	}()
	<-reading
	waiter := takeBehindRead(t, p)
	p.invalidate("news") // a task arrives while the read runs
	close(finish)
	if err := <-first; err != nil {
		t.Fatalf("the reader: %v", err)
	}
	r := <-waiter
	if r.err != nil || len(r.got) != 1 {
		t.Fatalf("the waiting claim: %v, %v; want the task that arrived", pooledIDs(r.got), r.err)
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2", n)
	}
}

// IdleWaiters returns how many callers long-poll cat in d, waiting for a
// wake-up (not looking).
func (d *Dispatcher) IdleWaiters(cat string) int {
	d.hub.mu.Lock()
	defer d.hub.mu.Unlock()
	n := 0
	if q := d.hub.queues[cat]; q != nil {
		for l := q.head; l != nil; l = l.next {
			n++
		}
	}
	return n
}

// At most wakeBusyMax waiters of a category are woken at once; the other
// wake-ups go out, oldest waiter first, as their looks end.
func TestHubWakesAtMostBusyMaxAtOnce(t *testing.T) {
	h := newHub(nil)
	ws := idleWaiters(t, h, wakeBusyMax+3, "news")
	h.wake("news", wakeBusyMax+3)
	got := woken(ws)
	if len(got) != wakeBusyMax || got[len(got)-1] != wakeBusyMax-1 {
		t.Fatalf("woken %d (the last %d), want the oldest %d", len(got), got[len(got)-1], wakeBusyMax)
	}
	h.leave(ws[0]) // answered
	if got := woken(ws); !slices.Equal(got, []int{wakeBusyMax}) {
		t.Fatalf("after a look ended in a claim: woken %v, want [%d]", got, wakeBusyMax)
	}
	if h.rest(ws[1]) { // found nothing: idle again, and the oldest
		t.Fatal("told to look again")
	}
	if got := woken(ws); !slices.Equal(got, []int{1}) {
		t.Fatalf("after an empty look: woken %v, want [1]", got)
	}
	h.leave(ws[2])
	if got := woken(ws); !slices.Equal(got, []int{wakeBusyMax + 1}) {
		t.Fatalf("woken %v, want [%d]", got, wakeBusyMax+1)
	}
	for _, w := range ws[3:] {
		h.leave(w)
	}
	h.leave(ws[1])
	if h.waiting() != 0 {
		t.Fatal("waiting with every waiter gone")
	}
}

// Candidates a claim gave back wake waiters as arrivals do, without making
// the category's candidates stale.
func TestHubGiveWakesWithoutANewRead(t *testing.T) {
	var arrived int
	h := newHub(func(string) { arrived++ })
	ws := idleWaiters(t, h, 3, "news")
	h.give("news", 2)
	if got := woken(ws); !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("woken %v, want the two oldest [0 1]", got)
	}
	if arrived != 0 {
		t.Fatalf("arrived told %d times of a give-back", arrived)
	}
	// None idle: a give-back is owed to the busy, who look again.
	h2 := newHub(nil)
	w := h2.subscribe([]string{"news"})
	h2.give("news", 1)
	if !h2.rest(w) {
		t.Fatal("a busy waiter went idle with a give-back owed")
	}
}

// wokenBy returns the wake-ups the waiters hold, taking them, by index.
func wokenBy(ws []*waiter) map[int]wakeUp {
	out := make(map[int]wakeUp)
	for i, w := range ws {
		select {
		case wu := <-w.c:
			out[i] = wu
		default:
		}
	}
	return out
}

// A poll wakes the oldest idle waiter of each category, one in all, and
// none of a crowded category; a look it woke that found something passes
// two polls on.
func TestHubPoll(t *testing.T) {
	var arrived int
	h := newHub(func(string) { arrived++ })
	ws := idleWaiters(t, h, 3, "news")
	both := idleWaiters(t, h, 1, "news", "sports")[0]
	all := append(slices.Clone(ws), both)
	h.poll()
	got := wokenBy(all)
	if len(got) != 2 || got[0] != (wakeUp{"news", true}) || got[3] != (wakeUp{"sports", true}) {
		t.Fatalf("a poll woke %v, want the oldest of news [0] and the waiter of sports [3], as polls", got)
	}
	// 0 found a task: two more of news look, as polls.
	h.pollOn("news")
	if got := wokenBy(all); len(got) != 2 || !got[1].poll || !got[2].poll {
		t.Fatalf("passed on to %v, want [1 2] as polls", got)
	}
	for _, i := range []int{1, 2} {
		if h.rest(ws[i]) {
			t.Fatalf("waiter %d told to look again", i)
		}
	}
	if arrived != 0 {
		t.Fatalf("polls told arrived %d times: the candidates read need not be read again", arrived)
	}
	// An arrival is no poll.
	h.wake("news", 1)
	if got := wokenBy(all); len(got) != 1 || got[1] != (wakeUp{"news", false}) {
		t.Fatalf("an arrival woke %v, want [1] not as a poll", got)
	}
	// 0's next poll look finds something while 1, woken by an arrival,
	// looks: no poll is passed on (in a crowd woken by arrivals, polls
	// passed on would double at every claim).
	if h.rest(ws[0]) {
		t.Fatal("waiter 0 told to look again")
	}
	h.poll()
	if got := wokenBy(all); len(got) != 1 || !got[0].poll {
		t.Fatalf("a poll woke %v, want [0] as a poll", got)
	}
	h.pollOn("news")
	if got := wokenBy(all); len(got) > 0 {
		t.Fatalf("a poll passed on to %v while an arrival's look was busy", got)
	}
	for _, w := range all {
		h.leave(w)
	}
	if h.waiting() != 0 {
		t.Fatal("waiting with every waiter gone")
	}

	// Crowded: the woken look already, a poll adds nobody.
	crowd := idleWaiters(t, h, wakeBusyMax+2, "news")
	h.wake("news", wakeBusyMax+2)
	if got := woken(crowd); len(got) != wakeBusyMax {
		t.Fatalf("woken %d, want %d", len(got), wakeBusyMax)
	}
	h.poll()
	if got := woken(crowd); got != nil {
		t.Fatalf("a poll of a crowded category woke %v", got)
	}
	for _, w := range crowd {
		h.leave(w)
	}
}

// With a poll interval, the hub polls by itself while a waiter is idle, and
// stops when none is.
func TestHubPollsWhileIdle(t *testing.T) {
	h := newHub(nil)
	h.every = 10 * time.Millisecond
	w := idleWaiters(t, h, 1, "news")[0]
	select {
	case wu := <-w.c:
		if !wu.poll {
			t.Fatalf("woken by %+v, want a poll", wu)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no poll in 10s with a poll interval of 10ms")
	}
	// Busy now: the polls stop once none is idle.
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		armed := h.poller != nil
		h.mu.Unlock()
		if !armed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hub still polls with no idle waiter")
		}
		time.Sleep(time.Millisecond)
	}
	h.leave(w)
}

// HubPolls returns how many polls d's hub made (see hub.poll).
func (d *Dispatcher) HubPolls() uint64 {
	d.hub.mu.Lock()
	defer d.hub.mu.Unlock()
	return d.hub.polls
}

// A cancel's announcement shares the wake-ups' channel: it reads back as the
// claim it names, and a wake-up, or anything else, does not read as one; a
// process that knows only wake-ups reads it as no wake-up at all.
func TestCancelMessages(t *testing.T) {
	t.Parallel()
	n := &notifier{}
	var told []ClaimRef
	stop := n.watchCancels(func(ref ClaimRef) { told = append(told, ref) })
	n.cancelled(context.Background(), ClaimRef{TaskID: 42, Fence: 7})
	stop()
	n.cancelled(context.Background(), ClaimRef{TaskID: 43, Fence: 1})
	if !slices.Equal(told, []ClaimRef{{TaskID: 42, Fence: 7}}) {
		t.Errorf("watcher told %v, want task 42 fence 7 once, nothing after stop", told)
	}

	msg := cancelPrefix + "42:7"
	if ref, ok := decodeCancel(msg); !ok || ref != (ClaimRef{TaskID: 42, Fence: 7}) {
		t.Errorf("decodeCancel(%q) = %v, %v", msg, ref, ok)
	}
	if counts := decodeCounts(msg); len(counts) != 0 {
		t.Errorf("a cancel read as wake-ups %v", counts)
	}
	for _, s := range []string{encodeCounts(map[string]int{"news": 1}), "cancel:", "cancel:42", "cancel:x:7", "cancel:42:y"} {
		if ref, ok := decodeCancel(s); ok {
			t.Errorf("decodeCancel(%q) = %v, want no cancel", s, ref)
		}
	}
}
