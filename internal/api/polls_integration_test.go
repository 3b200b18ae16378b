package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/testenv"
)

// TestLongPollsPerEditorAreBounded: past MaxPollsPerEditor, an editor's
// oldest long poll is answered 204 at once, and the newer ones wait on.
func TestLongPollsPerEditorAreBounded(t *testing.T) {
	t.Parallel()
	// Each poll waits ten minutes, far beyond the waits below: a 204 within
	// them is the answer to a newer poll.
	const wait = 10 * time.Minute
	b := setup(t, setupOpts{
		api:        api.Config{MaxPollsPerEditor: 2, MaxWait: wait},
		dispatcher: dispatcher.Config{MaxWait: wait},
	})
	ed := b.editor(t, "poller", "nothing-here")
	held := fmt.Sprintf(`msg="long poll held" editor_id=%d `, ed.ID)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	answers := make([]chan int, 4)
	open := func(i int) {
		answers[i] = make(chan int, 1)
		go func() {
			res, err := b.doCtx(ctx, "POST", "/v1/assignments/next", ed.Token, fmt.Sprintf(`{"wait_ms":%d}`, wait.Milliseconds()))
			if err != nil {
				answers[i] <- 0
				return
			}
			answers[i] <- res.status
		}()
		// The next one opens once this one is held.
		testenv.Eventually(t, 30*time.Second, fmt.Sprintf("poll %d held", i+1), func() bool {
			return strings.Count(b.logs.String(), held) >= i+1
		})
	}
	waiting := func(i int) {
		t.Helper()
		select {
		case status := <-answers[i]:
			t.Fatalf("poll %d answered %d, want it still waiting", i+1, status)
		default:
		}
	}
	answered := func(i int) {
		t.Helper()
		select {
		case status := <-answers[i]:
			if status != http.StatusNoContent {
				t.Fatalf("poll %d answered %d, want 204", i+1, status)
			}
		case <-time.After(wait / 2):
			t.Fatalf("poll %d was not answered when a newer one came", i+1)
		}
	}
	open(0)
	open(1)
	waiting(0)
	open(2)
	answered(0)
	waiting(1)
	waiting(2)
	open(3)
	answered(1)
	waiting(2)
	waiting(3)
}

// TestUndeliveredClaimsAreGivenBack: editors of capacity 5 keep more long
// polls open than MaxPollsPerEditor lets them, so that polls end while their
// claims are in flight, and submit what they are given while tasks trickle
// in. Every claim made is then either answered 200 to one of their requests
// (a poll's, or a submit's next) or given back at once ('released',
// "undelivered"); none is left for its lease to recycle.
func TestUndeliveredClaimsAreGivenBack(t *testing.T) {
	t.Parallel()
	const (
		editors  = 4
		polls    = 6 // concurrent polls per editor, more than its bound
		capacity = 5
		run      = 4 * time.Second
	)
	b := setup(t, setupOpts{
		api: api.Config{MaxPollsPerEditor: 2},
		// A claim left behind stays assigned to the end of the test.
		dispatcher: dispatcher.Config{Lease: 10 * time.Minute},
	})
	type ref struct {
		Task  int64 `db:"task"`
		Fence int64 `db:"fence"`
	}
	var (
		mu        sync.Mutex
		delivered = map[ref]bool{}
		answers   = map[int]int{}
	)
	ctx, stop := context.WithTimeout(context.Background(), run)
	defer stop()
	var wg sync.WaitGroup
	for e := range editors {
		ed := b.editorWith(t, fmt.Sprintf("cap-%d", e), capacity, nil, "trickle")
		for p := range polls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					wait := 20 + 40*((i+p)%5)
					res, err := b.doCtx(context.Background(), "POST", "/v1/assignments/next", ed.Token, fmt.Sprintf(`{"wait_ms":%d}`, wait))
					if err != nil {
						t.Errorf("next: %v", err)
						return
					}
					mu.Lock()
					answers[res.status]++
					mu.Unlock()
					if res.status != http.StatusOK {
						continue
					}
					// Submitted at once, and each next the submit answers too.
					for body := res.body; body != nil; {
						var a assignment
						if err := json.Unmarshal(body, &a); err != nil {
							t.Errorf("assignment %s: %v", body, err)
							return
						}
						mu.Lock()
						delivered[ref{a.Task.ID, a.Fence}] = true
						mu.Unlock()
						res, err := b.doCtx(context.Background(), "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ed.Token,
							fmt.Sprintf(`{"fence":%d,"result":{}}`, a.Fence))
						if err == nil && (res.status == http.StatusConflict || res.status == http.StatusServiceUnavailable) {
							// Another request of the editor was answered
							// with the same claim, at capacity, and
							// submitted it first; or a store was slow
							// on a loaded machine. The claim was
							// answered either way: what follows it is
							// not this test's.
							break
						}
						if err != nil || res.status != http.StatusOK {
							t.Errorf("submit task %d: %v %d %s", a.Task.ID, err, res.status, res.body)
							return
						}
						var out struct {
							Next json.RawMessage `json:"next"`
						}
						if err := json.Unmarshal(res.body, &out); err != nil {
							t.Errorf("submit answer %s: %v", res.body, err)
							return
						}
						body = nil
						if string(out.Next) != "null" {
							body = out.Next
						}
					}
				}
			}()
		}
	}
	// Tasks trickle in, a few at a time.
	added := 0
	for tick := time.NewTicker(15 * time.Millisecond); ctx.Err() == nil; <-tick.C {
		b.addN(t, "trickle", 2)
		added += 2
	}
	wg.Wait()

	var claims []ref
	if err := b.db.Select(&claims, "SELECT task_id AS task, fence FROM task_events WHERE kind = 'claimed'"); err != nil {
		t.Fatal(err)
	}
	var givenBack []ref
	if err := b.db.Select(&givenBack, "SELECT task_id AS task, fence FROM task_events WHERE kind = 'released' AND detail = 'undelivered'"); err != nil {
		t.Fatal(err)
	}
	back := map[ref]bool{}
	for _, r := range givenBack {
		back[r] = true
	}
	var lost []ref
	both := 0 // answered at capacity as a held claim, as its own request gave it back
	for _, c := range claims {
		if !delivered[c] && !back[c] {
			lost = append(lost, c)
		}
		if delivered[c] && back[c] {
			both++
		}
	}
	var expired int
	if err := b.db.Get(&expired, "SELECT COUNT(*) FROM task_events WHERE kind IN ('expired', 'recycled')"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d tasks added, answers %v, %d claims: %d answered, %d given back at once (%d of them answered too), %d left behind; %d expired",
		added, answers, len(claims), len(delivered), len(givenBack), both, len(lost), expired)
	if len(lost) > 0 || expired > 0 {
		t.Errorf("claims neither answered nor given back: %v", lost)
	}
	if len(delivered) == 0 {
		t.Error("no claim was answered")
	}
}
