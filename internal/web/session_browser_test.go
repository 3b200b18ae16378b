package web_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/taskd/taskd"
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
