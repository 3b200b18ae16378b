package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/testenv"
)

type pauseAnswer struct {
	Category string  `json:"category"`
	Paused   bool    `json:"paused"`
	PausedAt *string `json:"paused_at"`
	Changed  bool    `json:"changed"`
}

func (b *bundle) pause(t *testing.T, op, cat string) pauseAnswer {
	t.Helper()
	var p pauseAnswer
	wantJSON(t, b.do(t, "POST", "/v1/admin/categories/"+cat+"/"+op, adminToken, ""), http.StatusOK, &p)
	return p
}

func TestPauseRoutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")

	before := b.snapshot(t)
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"no token", "POST", "/v1/admin/categories/news/pause", "", "", 401, "unauthorized"},
		{"editor token", "POST", "/v1/admin/categories/news/pause", e.Token, "", 403, "forbidden"},
		{"editor token, resume", "POST", "/v1/admin/categories/news/resume", e.Token, "", 403, "forbidden"},
		{"editor token, list", "GET", "/v1/admin/categories/paused", e.Token, "", 403, "forbidden"},
		{"leading space", "POST", "/v1/admin/categories/%20news/pause", adminToken, "", 422, "invalid"},
		{"too long", "POST", "/v1/admin/categories/" + string(slices.Repeat([]byte("x"), 65)) + "/pause", adminToken, "", 422, "invalid"},
		{"invalid UTF-8", "POST", "/v1/admin/categories/%FF/resume", adminToken, "", 422, "invalid"},
		{"unknown field", "POST", "/v1/admin/categories/news/pause", adminToken, `{"until":"tomorrow"}`, 400, "bad_request"},
		{"GET pause", "GET", "/v1/admin/categories/news/pause", adminToken, "", 405, "method_not_allowed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, b.do(t, c.method, c.path, c.token, c.body), c.status, c.code)
		})
	}
	b.unchanged(t, before)
	if n := b.count(t, `SELECT COUNT(*) FROM paused_categories`); n != 0 {
		t.Fatalf("refused requests paused %d categories", n)
	}

	p := b.pause(t, "pause", "news")
	if !p.Paused || !p.Changed || p.Category != "news" || p.PausedAt == nil {
		t.Errorf("pause = %+v", p)
	}
	at := parseTime(t, *p.PausedAt)
	again := b.pause(t, "pause", "news")
	if !again.Paused || again.Changed || again.PausedAt == nil || !parseTime(t, *again.PausedAt).Equal(at) {
		t.Errorf("pause again = %+v, want unchanged since %v", again, at)
	}
	b.pause(t, "pause", "a%2Fb") // a category with a slash, escaped in the path
	var list struct {
		Paused []struct {
			Category string `json:"category"`
			PausedAt string `json:"paused_at"`
		} `json:"paused"`
	}
	wantJSON(t, b.do(t, "GET", "/v1/admin/categories/paused", adminToken, ""), http.StatusOK, &list)
	if len(list.Paused) != 2 || list.Paused[0].Category != "a/b" || list.Paused[1].Category != "news" ||
		!parseTime(t, list.Paused[1].PausedAt).Equal(at) {
		t.Errorf("paused list = %+v", list)
	}
	var st struct {
		Paused []string `json:"paused"`
	}
	res := b.do(t, "GET", "/v1/stats", adminToken, "")
	if err := json.Unmarshal(res.body, &st); err != nil || !slices.Equal(st.Paused, []string{"a/b", "news"}) {
		t.Errorf("stats paused = %v (%v): %s", st.Paused, err, res.body)
	}

	if r := b.pause(t, "resume", "news"); r.Paused || !r.Changed || r.PausedAt != nil {
		t.Errorf("resume = %+v", r)
	}
	if r := b.pause(t, "resume", "news"); r.Paused || r.Changed {
		t.Errorf("resume again = %+v, want nothing changed", r)
	}
	wantJSON(t, b.do(t, "GET", "/v1/admin/categories/paused", adminToken, ""), http.StatusOK, &list)
	if len(list.Paused) != 1 || list.Paused[0].Category != "a/b" {
		t.Errorf("paused list after resume = %+v", list)
	}
}

// TestPausedCategoryUnderManyEditors has 50 editors long-poll a paused category with
// pending tasks: none is handed out while it is paused, as the database shows; after
// the resume every task is handed out, once.
func TestPausedCategoryUnderManyEditors(t *testing.T) {
	t.Parallel()
	// A short poll interval: waiting editors look again and again while paused.
	b := setup(t, setupOpts{dispatcher: dispatcher.Config{PollInterval: 50 * time.Millisecond}})
	const editors, n = 50, 120
	ids := b.addN(t, "news", n)
	// One claim reads news candidates into this process's pool before the pause.
	first := b.editor(t, "first", "news")
	a := b.next(t, first.Token)
	res := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), first.Token, `{"fence":`+fmt.Sprint(a.Fence)+`,"result":{}}`)
	wantJSON(t, res, http.StatusOK, nil)
	var next struct {
		Next *assignment `json:"next"`
	}
	if err := json.Unmarshal(res.body, &next); err != nil || next.Next == nil {
		t.Fatalf("submit answer %s: %v", res.body, err)
	}
	// first keeps a live claim through the pause.
	held := *next.Next

	p := b.pause(t, "pause", "news")
	if !p.Changed {
		t.Fatal("news was paused already")
	}
	tokens := make([]string, editors)
	for i := range tokens {
		tokens[i] = b.editor(t, fmt.Sprintf("ed%02d", i), "news").Token
	}

	var (
		resumed   atomic.Bool
		polls     atomic.Int64 // long polls answered while paused
		duringGot atomic.Int64 // assignments answered while paused
		mu        sync.Mutex
		got       = make(map[int64]int) // task id -> times handed out after the resume
		submitted atomic.Int64
		wg        sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, tok := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil && submitted.Load() < n-2 {
				wasResumed := resumed.Load()
				res, err := b.doCtx(ctx, "POST", "/v1/assignments/next", tok, `{"wait_ms":300}`)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("next: %v", err)
					}
					return
				}
				switch res.status {
				case http.StatusNoContent:
					if !wasResumed {
						polls.Add(1)
					}
					continue
				case http.StatusOK:
				default:
					t.Errorf("next: %d %s", res.status, res.body)
					return
				}
				var a assignment
				if err := json.Unmarshal(res.body, &a); err != nil {
					t.Errorf("next: %v", err)
					return
				}
				if !resumed.Load() {
					duringGot.Add(1)
				}
				mu.Lock()
				got[a.Task.ID]++
				mu.Unlock()
				sub, err := b.doCtx(ctx, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), tok,
					fmt.Sprintf(`{"fence":%d,"result":{"by":"x"}}`, a.Fence))
				if err != nil || sub.status != http.StatusOK {
					t.Errorf("submit: %v %d %s", err, sub.status, sub.body)
					return
				}
				submitted.Add(1)
				// The answer may carry the next assignment; asking again returns
				// it (the held claim), so the loop need not read it.
			}
		}()
	}

	// Every editor long-polls three times over while paused.
	testenv.Eventually(t, 30*time.Second, "editors poll while paused", func() bool { return polls.Load() >= 3*editors })
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'claimed'`); n != 2 {
		t.Fatalf("%d claims while paused, want only first's two from before the pause", n)
	}
	if n := duringGot.Load(); n != 0 {
		t.Fatalf("%d assignments answered while paused", n)
	}
	// The claim live at the pause still finishes.
	hb := b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", held.Task.ID), first.Token, fmt.Sprintf(`{"fence":%d}`, held.Fence))
	wantJSON(t, hb, http.StatusOK, nil)
	res = b.do(t, "POST", fmt.Sprintf("/v1/assignments/%d/submit", held.Task.ID), first.Token, fmt.Sprintf(`{"fence":%d,"result":{}}`, held.Fence))
	wantJSON(t, res, http.StatusOK, &next)
	if next.Next != nil {
		t.Errorf("submit while paused handed out task %d", next.Next.Task.ID)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'claimed'`); n != 2 {
		t.Fatalf("%d claims while paused, want 2", n)
	}

	pausedPolls := polls.Load()
	resumed.Store(true)
	resumeAt := time.Now()
	b.pause(t, "resume", "news")
	wg.Wait()
	t.Logf("%d editors: %d empty long polls while paused, 0 claims; %d tasks handed out and submitted %v after the resume",
		editors, pausedPolls, submitted.Load(), time.Since(resumeAt).Round(time.Millisecond))
	if ctx.Err() != nil {
		t.Fatalf("editors did not finish the pool after the resume: %d of %d submitted", submitted.Load(), n-2)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM tasks WHERE status = 'done'`); n != len(ids) {
		t.Errorf("%d tasks done, want %d", n, len(ids))
	}
	if n := b.count(t, `SELECT COUNT(*) FROM task_results`); n != len(ids) {
		t.Errorf("%d results, want one per task (%d)", n, len(ids))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != n-2 {
		t.Errorf("%d distinct tasks handed out after the resume, want %d", len(got), n-2)
	}
	for id, k := range got {
		if k != 1 {
			t.Errorf("task %d handed out %d times", id, k)
		}
	}
}

// TestResumeWakesWaitingEditors: an editor long-polling a paused category gets its
// task as soon as the category is resumed through the API, not at its next poll.
func TestResumeWakesWaitingEditors(t *testing.T) {
	t.Parallel()
	// A poll interval far longer than the test: only a wake-up can end the wait.
	b := setup(t, setupOpts{dispatcher: dispatcher.Config{PollInterval: time.Hour}})
	e := b.editor(t, "ada", "news")
	b.pause(t, "pause", "news")
	id := b.addN(t, "news", 1)[0]
	got := make(chan response, 1)
	go func() {
		res, err := b.doCtx(context.Background(), "POST", "/v1/assignments/next", e.Token, `{"wait_ms":60000}`)
		if err != nil {
			t.Error(err)
		}
		got <- res
	}()
	testenv.Eventually(t, 20*time.Second, "ada waits", func() bool { return b.d.Stats().Waiting > 0 })
	if n := b.count(t, `SELECT COUNT(*) FROM task_events WHERE kind = 'claimed'`); n != 0 {
		t.Fatalf("%d claims while paused", n)
	}
	b.pause(t, "resume", "news")
	var a assignment
	wantJSON(t, <-got, http.StatusOK, &a)
	if a.Task.ID != id {
		t.Errorf("ada got task %d, want %d", a.Task.ID, id)
	}
}
