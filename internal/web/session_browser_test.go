package web_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
)

// countNavigations counts the tab's main-frame navigations from now on.
func (tb *tab) countNavigations() *atomic.Int64 {
	var n atomic.Int64
	events := chromedp.Events(tb.ctx, page.FrameNavigated)
	go func() {
		for ev, err := range events {
			if err != nil {
				return
			}
			if ev.Frame.ParentID == "" {
				n.Add(1)
			}
		}
	}()
	return &n
}

// signedOutForm is true once the workspace shows its sign-in form in place.
const signedOutForm = `document.body.dataset.state === "signed-out" && !document.getElementById("signed-out").hidden && document.activeElement === document.getElementById("token")`

// TestBrowserNewTokenSignsOut: once an editor is given a new token, its
// open workspace shows the sign-in form at its next call, without loading
// itself again (and again); signing in there with the new token goes on
// with the held task.
func TestBrowserNewTokenSignsOut(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second // a heartbeat every second
	s := startServer(t, cfg)
	id, token := s.editor("Ida", "news")
	s.addTask("news", 1, "Held across the new token", map[string]any{"text": "a"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Held across the new token")
	navs := tb.countNavigations()
	var fresh struct {
		Token string `json:"token"`
	}
	s.admin("POST", "/v1/editors/"+itoa(id)+"/token", nil, http.StatusOK, &fresh)
	start := time.Now()
	tb.waitJS("the sign-in form", signedOutForm)
	// The measure: navigations in the 5 s after the new token.
	window := time.NewTimer(time.Until(start.Add(5 * time.Second)))
	select {
	case <-window.C:
	case <-tb.ctx.Done():
		t.Fatal(tb.ctx.Err())
	}
	t.Logf("navigations in the 5 s after the new token: %d", navs.Load())
	if n := navs.Load(); n > 1 {
		t.Errorf("%d navigations in the 5 s after the new token, want at most 1", n)
	}
	if !eval[bool](tb, signedOutForm) {
		t.Error("the sign-in form is gone again")
	}
	if st := eval[string](tb, `document.getElementById("status").textContent`); st != "" {
		t.Errorf("notice %q beside the sign-in form", st)
	}
	tb.screenshot("workspace-signed-out")

	tb.do("sign in with the new token",
		chromedp.SendKeys(chromedp.CSS("#token"), fresh.Token),
		chromedp.Submit(chromedp.CSS("#token")),
	)
	tb.showing("Held across the new token")
}

// TestBrowserDisableEndsSession: a disabled editor's workspace shows the
// sign-in form, and once the editor is enabled again its old session still
// opens nothing: the page is the sign-in page.
func TestBrowserDisableEndsSession(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second
	s := startServer(t, cfg)
	id, token := s.editor("Jo", "news")
	s.addTask("news", 1, "Before the disable", map[string]any{"text": "a"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Before the disable")
	s.admin("POST", "/v1/editors/"+itoa(id)+"/disable", nil, http.StatusOK, nil)
	tb.waitJS("the sign-in form", signedOutForm)
	s.admin("POST", "/v1/editors/"+itoa(id)+"/enable", nil, http.StatusOK, nil)
	tb.do("open the workspace again", chromedp.Navigate(s.base+"/"))
	tb.waitJS("the sign-in page", `document.body.classList.contains("signin") && !!document.getElementById("token")`)
	if eval[bool](tb, `!!document.getElementById("submit-form")`) {
		t.Error("the old session opens the workspace after disable and enable")
	}
}

// TestBrowserDisabledAnswerSignsOut: a call answered 403 editor_disabled
// ends the workspace's session as a 401 does: the page shows the sign-in
// form in place and asks nothing more. The editor is disabled behind the
// API's back, so that the session's epoch did not move and the answer is
// editor_disabled, as on a process whose cache has not yet seen a disable.
func TestBrowserDisabledAnswerSignsOut(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second // a heartbeat every second
	cfg.HTTP.EditorCacheTTL = -1            // every call reads the editor from MySQL
	db := storetest.NewDB(t)
	s := startServer(t, cfg, taskd.WithDB(db))
	id, token := s.editor("Kit", "news")
	s.addTask("news", 1, "Held when disabled", map[string]any{"text": "a"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Held when disabled")
	// The page's calls and their statuses, in the order they are answered.
	tb.do("record the page's calls", chromedp.Evaluate[chromedp.Void](`(function () {
		window.taskdCalls = [];
		var f = window.fetch;
		window.fetch = function (url, opts) {
			return f(url, opts).then(function (res) {
				window.taskdCalls.push({ url: String(url), status: res.status });
				return res;
			});
		};
	})()`))
	if _, err := db.ExecContext(t.Context(), "UPDATE editors SET disabled_at = NOW(3) WHERE id = ?", id); err != nil {
		t.Fatal(err)
	}
	tb.waitJS("the sign-in form", signedOutForm)
	// A heartbeat's interval more: the page must still be asking nothing.
	time.Sleep(1500 * time.Millisecond)
	type call struct {
		URL    string `json:"url"`
		Status int    `json:"status"`
	}
	calls := eval[[]call](tb, `window.taskdCalls`)
	first := -1
	for i, c := range calls {
		if c.Status == http.StatusForbidden {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatalf("no call answered 403: %v", calls)
	}
	if after := calls[first+1:]; len(after) > 0 {
		t.Errorf("the page called %v after the 403 editor_disabled, want nothing", after)
	}
	if !eval[bool](tb, signedOutForm) {
		t.Error("the sign-in form is gone again")
	}
	if st := eval[string](tb, `document.getElementById("status").textContent`); st != "" {
		t.Errorf("notice %q beside the sign-in form", st)
	}
}
