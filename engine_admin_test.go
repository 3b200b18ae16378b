package taskd_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// A category resumed through the engine (as `taskd resume` does) wakes the
// editor long-polling for it at once: its poll, which nothing else would end
// for a minute, answers with the task.
func TestEngineResumeWakesWaiters(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := taskd.Config{AdminToken: testAdminToken}
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.Dispatch.PollInterval = time.Hour // no look of the poll's own
	e := newEngine(t, cfg)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	token, hash := tasks.NewToken()
	if _, err := e.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ada", Categories: []string{"news"}, TokenHash: hash}); err != nil {
		t.Fatal(err)
	}
	if _, paused, err := e.PauseCategory(ctx, "news"); err != nil || !paused {
		t.Fatalf("pause: %v, %v", paused, err)
	}
	ins, err := e.InsertTasks(ctx, []tasks.NewTask{{Category: "news", Title: "a"}})
	if err != nil || len(ins) != 1 || !ins[0].Created {
		t.Fatalf("insert: %+v, %v", ins, err)
	}
	polled := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+e.Addr()+"/v1/assignments/next", strings.NewReader(`{"wait_ms": 60000}`))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- err.Error()
			return
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		polled <- res.Status + " " + string(b)
	}()
	testenv.Eventually(t, 10*time.Second, "the long poll waits", e.WaitingForTest)
	if resumed, err := e.ResumeCategory(ctx, "news"); err != nil || !resumed {
		t.Fatalf("resume: %v, %v", resumed, err)
	}
	if got := <-polled; !strings.HasPrefix(got, "200 ") || !strings.Contains(got, `"title":"a"`) {
		t.Fatalf("the long poll answered %q, want 200 with the task", got)
	}
}

// The editor methods: a disabled editor's claim is revoked, a new token
// replaces the old, and enabling lets it claim again.
func TestEngineEditors(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := newEngine(t, taskd.Config{AdminToken: testAdminToken})
	_, hash := tasks.NewToken()
	ed, err := e.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ada", Categories: []string{"news"}, TokenHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ada", Categories: []string{"news"}, TokenHash: hash}); !errors.Is(err, tasks.ErrDuplicate) {
		t.Errorf("a second editor ada: %v, want ErrDuplicate", err)
	}
	name := "ada lovelace"
	if got, err := e.UpdateEditor(ctx, tasks.UpdateEditorParams{ID: ed.ID, Name: &name, Categories: []string{"sport"}}); err != nil ||
		got.Name != name || len(got.Categories) != 1 || got.Categories[0] != "sport" {
		t.Fatalf("update: %+v, %v", got, err)
	}
	if revoked, err := e.DisableEditor(ctx, ed.ID); err != nil || len(revoked) != 0 {
		t.Fatalf("disable: %+v, %v; want no claim revoked", revoked, err)
	}
	if _, err := e.DisableEditor(ctx, ed.ID+1000); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("disable an unknown editor: %v, want ErrNotFound", err)
	}
	if err := e.EnableEditor(ctx, ed.ID); err != nil {
		t.Fatal(err)
	}
	_, hash2 := tasks.NewToken()
	if err := e.SetEditorToken(ctx, ed.ID, hash2); err != nil {
		t.Fatal(err)
	}
	if err := e.SetEditorToken(ctx, ed.ID+1000, hash); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("a token for an unknown editor: %v, want ErrNotFound", err)
	}
	st, err := e.PoolStats(ctx, 0)
	if err != nil || st == nil {
		t.Fatalf("pool stats: %+v, %v", st, err)
	}
}

// A change made through the engine's editor methods shows in the engine's
// API at once, not after the API's editor cache (an hour here) forgets the
// editor: a disabled editor's token is refused on its next request, and so
// is a replaced token, while the new one is taken.
func TestEngineEditorChangesShowInTheAPIAtOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	cfg := taskd.Config{AdminToken: testAdminToken}
	cfg.HTTP.Addr = "127.0.0.1:0"
	cfg.HTTP.EditorCacheTTL = time.Hour
	e := newEngine(t, cfg)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	me := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+e.Addr()+"/v1/me", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	token, hash := tasks.NewToken()
	ed, err := e.CreateEditor(ctx, tasks.CreateEditorParams{Name: "ada", Categories: []string{"news"}, TokenHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	if got := me(token); got != http.StatusOK {
		t.Fatalf("GET /v1/me before the disable: %d, want 200", got)
	}
	if _, err := e.DisableEditor(ctx, ed.ID); err != nil {
		t.Fatal(err)
	}
	if got := me(token); got == http.StatusOK {
		t.Fatal("GET /v1/me right after the disable: 200, want the token refused")
	}
	if err := e.EnableEditor(ctx, ed.ID); err != nil {
		t.Fatal(err)
	}
	if got := me(token); got != http.StatusOK {
		t.Fatalf("GET /v1/me right after the enable: %d, want 200", got)
	}
	newToken, newHash := tasks.NewToken()
	if err := e.SetEditorToken(ctx, ed.ID, newHash); err != nil {
		t.Fatal(err)
	}
	if got := me(token); got == http.StatusOK {
		t.Fatal("GET /v1/me with the replaced token: 200, want it refused")
	}
	if got := me(newToken); got != http.StatusOK {
		t.Fatalf("GET /v1/me with the new token: %d, want 200", got)
	}
}
