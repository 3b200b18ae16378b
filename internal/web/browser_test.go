package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/testenv"
)

// ChromiumVar names the browser the tests drive; without it they look for
// chromium on PATH (scripts/services.sh installs Debian's chromium).
const ChromiumVar = "TASKD_TEST_CHROMIUM"

// ArtifactsVar names a directory for the tests' screenshots; default a
// directory under the system's temporary directory.
const ArtifactsVar = "TASKD_TEST_ARTIFACTS"

// browserTimeout bounds each browser test.
const browserTimeout = 90 * time.Second

// chromium returns the browser's path, or skips the test (fails it under
// TASKD_TEST_REQUIRE_SERVICES=1) when there is none.
func chromium(t *testing.T) string {
	return browser(t, ChromiumVar, "chromium", "chromium", "chromium-browser")
}

// browser returns the path in the variable envVar, else the first of names
// on PATH. Without either it skips the test, or fails it under
// TASKD_TEST_REQUIRE_SERVICES=1; debian names the package that
// scripts/services.sh installs.
func browser(t *testing.T, envVar, debian string, names ...string) string {
	t.Helper()
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv(testenv.RequireServicesVar) == "1" {
		t.Fatalf("%s is not installed but %s=1: run scripts/services.sh up as root (it installs Debian's %s), or set %s", names[0], testenv.RequireServicesVar, debian, envVar)
	}
	t.Skipf("%s is not installed: run `make test` as root (scripts/services.sh installs it) or set %s", names[0], envVar)
	return ""
}

// tab is a headless browser tab, with the dialogs and exceptions it saw.
type tab struct {
	t   *testing.T
	ctx context.Context

	mu         sync.Mutex
	dialogs    []string
	exceptions []string
}

// newTab starts a headless chromium with a window of w×h and opens a tab.
// Every dialog the page opens is recorded and dismissed.
func newTab(t *testing.T, w, h int) *tab {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.WindowSize(w, h),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses its sandbox as root
	}
	ctx, cancel := context.WithTimeout(t.Context(), browserTimeout)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	tb := &tab{t: t, ctx: bctx}
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	dialogs := chromedp.Events(bctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, string(ev.Type)+": "+ev.Message)
			tb.mu.Unlock()
			_, _ = chromedp.Call(bctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	exceptions := chromedp.Events(bctx, runtime.ExceptionThrown)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			text := ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				text += " " + ev.ExceptionDetails.Exception.Description
			}
			tb.mu.Lock()
			tb.exceptions = append(tb.exceptions, text)
			tb.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if len(tb.exceptions) > 0 {
			t.Errorf("the page threw: %q", tb.exceptions)
		}
	})
	return tb
}

// do runs actions, failing the test on an error.
func (tb *tab) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// waitJS waits until the JavaScript expression is truthy.
func (tb *tab) waitJS(what, expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	var err error
	for {
		_, err = chromedp.Run(tb.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(time.Until(deadline))))
		// A navigation (the sign-in form's redirect) ends the poll's page:
		// poll the new one.
		if err == nil || !strings.Contains(err.Error(), "-32000") || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		text, _ := chromedp.Run(tb.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
		tb.t.Fatalf("waiting for %s (%s): %v; the page says:\n%s", what, expr, err, text)
	}
}

// eval returns the value of a JavaScript expression.
func eval[T any](tb *tab, expr string) T {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// js quotes s as a JavaScript string.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// signIn opens the server's page and signs in with token, then waits for
// the workspace.
func (tb *tab) signIn(s *server, token string) {
	tb.t.Helper()
	tb.do("sign in",
		chromedp.Navigate(s.base+"/"),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Submit(chromedp.CSS("#token")),
	)
	tb.waitJS("the workspace", `document.body.hasAttribute("data-state")`)
}

// showing waits until the workspace shows the task with this title.
func (tb *tab) showing(title string) {
	tb.t.Helper()
	tb.waitJS("task "+title, `document.body.dataset.state === "task" && document.getElementById("t-title").textContent === `+js(title))
}

// screenshot writes the page as name.png to the artifacts directory.
func (tb *tab) screenshot(name string) string {
	tb.t.Helper()
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatalf("screenshot: %v", err)
	}
	return writeArtifact(tb.t, name, png)
}

// writeArtifact writes a screenshot as name.png to the artifacts directory
// and returns its path.
func writeArtifact(t *testing.T, name string, png []byte) string {
	t.Helper()
	dir := os.Getenv(ArtifactsVar)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "taskd-web-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	return path
}

// TestBrowserSubmitShowsNext: an editor signs in, gets a task with its
// payload rendered, submits it with Ctrl+Enter and sees the next at once;
// the result is the decision and notes; after the last, the page waits.
func TestBrowserSubmitShowsNext(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Ada Editor", "news")
	first := s.addTask("news", 9, "Council votes on the budget", map[string]any{
		"text":   "The council met on Tuesday.\n\nIt voted 7 to 2.",
		"source": "wire", "words": 812,
	})
	second := s.addTask("news", 1, "Harbour reopens", map[string]any{"body": "Ships are back."})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Council votes on the budget")
	if got := eval[[]string](tb, `Array.from(document.querySelectorAll("#t-text p")).map(p => p.textContent)`); strings.Join(got, "|") != "The council met on Tuesday.|It voted 7 to 2." {
		t.Errorf("text paragraphs %q", got)
	}
	if got := eval[string](tb, `Array.from(document.querySelectorAll("#t-fields dt, #t-fields dd")).map(e => e.textContent).join("|")`); got != "source|wire|words|812" {
		t.Errorf("fields %q", got)
	}
	tb.waitJS("the lease countdown", `/^\d+:\d\d$/.test(document.getElementById("t-lease").textContent)`)
	tb.screenshot("workspace-desktop")

	tb.do("decide and submit",
		chromedp.Click(chromedp.CSS(`input[name="decision"][value="reject"]`)),
		chromedp.SendKeys(chromedp.CSS("#notes"), "duplicate of yesterday's"),
		chromedp.KeyEvent(kb.Enter, chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	)
	tb.showing("Harbour reopens")
	if got := eval[string](tb, `document.getElementById("task").dataset.task`); got != strconv.FormatInt(second, 10) {
		t.Errorf("showing task %s, want %d", got, second)
	}
	// The next task starts from the default decision and empty notes.
	if got := eval[string](tb, `document.querySelector('input[name="decision"]:checked').value + "|" + document.getElementById("notes").value`); got != "approve|" {
		t.Errorf("the next task's decision|notes = %q, want the default %q", got, "approve|")
	}
	var task struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	s.admin("GET", fmt.Sprintf("/v1/tasks/%d", first), nil, http.StatusOK, &task)
	if task.Status != "done" || !strings.Contains(string(task.Result), `"decision":"reject"`) || !strings.Contains(string(task.Result), `duplicate of yesterday's`) {
		t.Errorf("first task %s, result %s: want done with the decision and notes", task.Status, task.Result)
	}
	tb.waitJS("today's count", `document.getElementById("today").textContent.includes("1 submitted")`)

	tb.do("submit the second", chromedp.Click(chromedp.CSS("#b-submit")))
	tb.waitJS("the calm waiting state", `document.body.dataset.state === "waiting" && !document.getElementById("waiting").hidden`)
	tb.screenshot("workspace-waiting")
	// Work that arrives while the page waits shows up through the long poll.
	s.addTask("news", 1, "Late arrival", map[string]any{"text": "Arrived while waiting."})
	tb.showing("Late arrival")
}

// TestBrowserLostClaim: a claim force-released by the admin makes the
// page say so on its next heartbeat, and it moves on to the next task.
func TestBrowserLostClaim(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second // heartbeats every second
	s := startServer(t, cfg)
	_, token := s.editor("Bo", "news")
	id := s.addTask("news", 5, "Taken away", map[string]any{"text": "x"})
	s.addTask("news", 1, "The next one", map[string]any{"text": "y"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Taken away")
	fence := eval[string](tb, `document.getElementById("task").dataset.fence`)

	s.admin("POST", fmt.Sprintf("/v1/admin/tasks/%d/release", id), map[string]any{}, http.StatusNoContent, nil)
	tb.waitJS("the lost-claim notice", `document.getElementById("status").textContent.includes("Your claim on task #`+strconv.FormatInt(id, 10)+` was lost")`)
	// It moved on: a task is shown under a new claim (the released task is
	// back in the pool, so it may be this one again, under a new fence).
	tb.waitJS("the next claim", `document.body.dataset.state === "task" && document.getElementById("task").dataset.fence !== `+js(fence)+
		` || document.getElementById("task").dataset.task !== `+js(strconv.FormatInt(id, 10)))
	if msg := eval[string](tb, `document.getElementById("status").textContent`); !strings.Contains(msg, "Moving on") {
		t.Errorf("notice %q does not say it moves on", msg)
	}
}

// TestBrowserHostileTaskIsInert: a title, payload and editor name full of
// markup render as text: no dialog opens, no element is made from them.
func TestBrowserHostileTaskIsInert(t *testing.T) {
	s := startServer(t, taskd.Config{})
	const hostile = `<script>alert("title")</script>"><img src=x onerror=alert(1)>`
	_, token := s.editor(`"><img src=x onerror=alert(5)>`, "news")
	s.addTask("news", 1, hostile, map[string]any{
		"text":                           `<script>alert(2)</script> and "><img src=x onerror=alert(3)>`,
		`"><img src=x onerror=alert(4)>`: `<svg onload=alert(6)>`,
		"nested":                         map[string]any{"html": `<iframe src="javascript:alert(7)">`},
	})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing(hostile)
	if got := eval[string](tb, `document.querySelector("#t-text p").textContent`); got != `<script>alert(2)</script> and "><img src=x onerror=alert(3)>` {
		t.Errorf("payload text %q", got)
	}
	if got := eval[string](tb, `document.querySelector(".who").textContent`); got != `"><img src=x onerror=alert(5)>` {
		t.Errorf("editor name %q", got)
	}
	if got := eval[int](tb, `document.querySelectorAll("img, svg, iframe, main script, header script").length`); got != 0 {
		t.Errorf("%d elements were made from the data", got)
	}
	if got := eval[string](tb, `document.getElementById("t-fields").textContent`); !strings.Contains(got, `<svg onload=alert(6)>`) || !strings.Contains(got, `javascript:alert(7)`) {
		t.Errorf("fields %q do not show the markup as text", got)
	}
	// Give any handler a chance to run: a round trip through the page's
	// event loop after the images would have failed to load.
	tb.waitJS("the page to settle", `document.readyState === "complete"`)
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.dialogs) > 0 {
		t.Errorf("dialogs opened: %q", tb.dialogs)
	}
}

// TestBrowserPhoneWidth: at 390×844 the workspace fits the width (nothing
// scrolls sideways) and a screenshot is written as an artifact.
func TestBrowserPhoneWidth(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Cy", "news")
	s.addTask("news", 3, "A fairly long headline about the regional transport plan and its budget", map[string]any{
		"text":   "The plan covers buses, trams and two new ferry routes.\n\nThe first phase starts in spring; the second depends on the vote in June.",
		"source": "regional desk", "section": "transport", "url": "https://example.com/a/very/long/path/that/should/wrap/and/not/overflow",
	})
	tb := newTab(t, 390, 844)
	tb.do("phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile))
	tb.do("the sign-in page", chromedp.Navigate(s.base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")))
	tb.screenshot("signin-phone")
	tb.signIn(s, token)
	tb.showing("A fairly long headline about the regional transport plan and its budget")
	if w := eval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("page is %dpx wide at a 390px viewport", w)
	}
	tb.screenshot("workspace-phone")
}

// TestBrowserSkipAndRelease: Alt+S asks for a reason and skips, Alt+R
// releases; each moves on at once and is recorded with its reason.
func TestBrowserSkipAndRelease(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Di", "news")
	first := s.addTask("news", 9, "Skip me", map[string]any{"text": "a"})
	second := s.addTask("news", 5, "Release me", map[string]any{"text": "b"})
	s.addTask("news", 1, "Keep me", map[string]any{"text": "c"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Skip me")
	tb.do("skip with Alt+S", chromedp.KeyEvent("s", chromedp.KeyModifiers(chromedp.ModifierAlt)))
	tb.waitJS("the reason field", `!document.getElementById("reason-row").hidden && document.activeElement.id === "reason"`)
	tb.do("give a reason", chromedp.SendKeys(chromedp.CSS("#reason"), "conflict of interest"+kb.Enter))
	tb.showing("Release me")

	tb.do("release", chromedp.Click(chromedp.CSS("#b-release")))
	tb.waitJS("the reason field", `!document.getElementById("reason-row").hidden`)
	tb.do("give a reason", chromedp.SendKeys(chromedp.CSS("#reason"), "need a specialist"), chromedp.Click(chromedp.CSS("#b-reason")))
	// The released task is back in the pool, kept from this editor for the
	// release cooldown: the next is another.
	tb.waitJS("the next claim", `document.body.dataset.state === "task" && document.getElementById("task").dataset.task !== `+js(strconv.FormatInt(first, 10))+
		` && document.getElementById("t-title").textContent !== "Skip me"`)
	tb.waitJS("today's counts", `document.getElementById("today").textContent.includes("1 skipped") && document.getElementById("today").textContent.includes("1 released")`)

	for id, want := range map[int64]string{first: "conflict of interest", second: "need a specialist"} {
		var task struct {
			History []struct {
				Detail string `json:"detail"`
			} `json:"history"`
		}
		s.admin("GET", fmt.Sprintf("/v1/tasks/%d", id), nil, http.StatusOK, &task)
		found := false
		for _, ev := range task.History {
			found = found || strings.Contains(ev.Detail, want)
		}
		if !found {
			t.Errorf("task %d history %+v lacks the reason %q", id, task.History, want)
		}
	}
}

// TestBrowserRecovers: with Redis frozen, a submit is answered 503; the
// page says the service is recovering, retries by itself, and goes on once
// Redis answers again.
func TestBrowserRecovers(t *testing.T) {
	rs := testenv.StartRedis(t)
	s := startServer(t, taskd.Config{}, taskd.WithRedis(rs.Client()))
	_, token := s.editor("Ed", "news")
	s.addTask("news", 9, "Before the outage", map[string]any{"text": "a"})
	s.addTask("news", 1, "After the outage", map[string]any{"text": "b"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Before the outage")
	rs.Pause()
	tb.do("submit", chromedp.Click(chromedp.CSS("#b-submit")))
	tb.waitJS("the recovering notice", `document.getElementById("status").textContent.includes("recovering")`)
	rs.Resume()
	tb.showing("After the outage")
	tb.waitJS("the notice to clear", `document.getElementById("status").hidden`)
}

// TestBrowserHiddenTabLetsClaimExpire: while the tab is hidden no heartbeat
// goes out, so the claim's lease runs out; the page says so and pauses, and
// once the tab is visible again it gets work.
func TestBrowserHiddenTabLetsClaimExpire(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 3 * time.Second // heartbeats every second while present
	s := startServer(t, cfg)
	_, token := s.editor("Flo", "news")
	id := s.addTask("news", 1, "Left alone", map[string]any{"text": "a"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Left alone")
	fence := eval[string](tb, `document.getElementById("task").dataset.fence`)
	// The browser says the tab is hidden, as it does when the editor
	// switches tabs or minimises the window.
	tb.do("hide the tab", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, "hidden", {configurable: true, get: () => true});
		document.dispatchEvent(new Event("visibilitychange"))`))
	tb.waitJS("the lease to run out", `document.getElementById("status").textContent.includes("Your lease on task #`+strconv.FormatInt(id, 10)+` ran out")`)
	tb.waitJS("the away state", `document.body.dataset.state === "away"`)
	tb.do("show the tab", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, "hidden", {configurable: true, get: () => false});
		document.dispatchEvent(new Event("visibilitychange"))`))
	tb.showing("Left alone")
	// A new claim of the same task: the old one ended, it was not kept alive.
	if got := eval[string](tb, `document.getElementById("task").dataset.fence`); got == fence {
		t.Errorf("fence %s after coming back, want a new claim", got)
	}
}

// TestBrowserHoldLimit: once a claim has been held for dispatch.max_hold,
// the page explains that its lease can no longer be extended.
func TestBrowserHoldLimit(t *testing.T) {
	cfg := taskd.Config{}
	cfg.Dispatch.LeaseTTL = 6 * time.Second
	cfg.Dispatch.MaxHold = 6 * time.Second // the first heartbeat, after 2s, would pass it
	s := startServer(t, cfg)
	_, token := s.editor("Gus", "news")
	s.addTask("news", 1, "Held too long", map[string]any{"text": "a"})

	tb := newTab(t, 1280, 900)
	tb.signIn(s, token)
	tb.showing("Held too long")
	tb.waitJS("the hold-limit notice", `document.getElementById("status").textContent.includes("held for the longest time allowed")`)
	if st := eval[string](tb, `document.body.dataset.state`); st != "task" {
		t.Errorf("state %q: the task should stay on the page until its lease ends", st)
	}
}
