package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
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
