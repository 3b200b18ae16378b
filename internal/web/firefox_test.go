package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/taskd/taskd"
)

// FirefoxVar names the Firefox the tests drive; without it they look for
// firefox-esr and firefox on PATH (scripts/services.sh installs Debian's
// firefox-esr).
const FirefoxVar = "TASKD_TEST_FIREFOX"

// firefox returns the browser's path, or skips the test (fails it under
// TASKD_TEST_REQUIRE_SERVICES=1) when there is none.
func firefox(t *testing.T) string {
	return browser(t, FirefoxVar, "firefox-esr", "firefox-esr", "firefox")
}

// firefoxPrefs go into the fresh profile's user.js: no first-run pages, no
// update, telemetry, studies or remote settings (nothing leaves loopback),
// no password saving. Firefox's remote agent adds its own recommended
// preferences for automation on top.
var firefoxPrefs = map[string]any{
	"app.normandy.enabled":                        false,
	"app.shield.optoutstudies.enabled":            false,
	"app.update.disabledForTesting":               true,
	"browser.aboutwelcome.enabled":                false,
	"browser.newtabpage.enabled":                  false,
	"browser.region.network.url":                  "",
	"browser.safebrowsing.downloads.enabled":      false,
	"browser.safebrowsing.malware.enabled":        false,
	"browser.safebrowsing.phishing.enabled":       false,
	"browser.safebrowsing.update.enabled":         false,
	"browser.sessionstore.resume_from_crash":      false,
	"browser.shell.checkDefaultBrowser":           false,
	"browser.startup.homepage":                    "about:blank",
	"browser.startup.homepage_override.mstone":    "ignore",
	"browser.startup.page":                        0,
	"datareporting.healthreport.uploadEnabled":    false,
	"datareporting.policy.dataSubmissionEnabled":  false,
	"extensions.getAddons.cache.enabled":          false,
	"extensions.update.enabled":                   false,
	"messaging-system.rsexperimentloader.enabled": false,
	"network.captive-portal-service.enabled":      false,
	"network.connectivity-service.enabled":        false,
	"services.settings.server":                    "data:,#remote-settings-dummy/v1",
	"signon.rememberSignons":                      false,
	"startup.homepage_welcome_url":                "about:blank",
	"toolkit.startup.max_resumed_crashes":         -1,
	"toolkit.telemetry.reportingpolicy.firstRun":  false,
}

// bidiListening is the line Firefox writes to stderr once its WebDriver BiDi
// server listens.
var bidiListening = regexp.MustCompile(`WebDriver BiDi listening on (ws://\S+)`)

// fxTab is one tab of a headless Firefox driven over WebDriver BiDi, with
// the JavaScript errors and Content-Security-Policy violations it logged.
type fxTab struct {
	t   *testing.T
	ctx context.Context // ends browserTimeout after the start
	c   *bidiClient
	bc  string // the tab's browsing context

	mu       sync.Mutex
	problems []string
	logged   chan struct{} // a token after each problem logged
}

// newFirefox starts a headless Firefox with a fresh profile, its viewport
// w×h CSS pixels at devicePixelRatio dpr, and subscribes to its log. The
// browser is stopped and its profile removed when the test ends, and the
// test fails if a page logged an error.
func newFirefox(t *testing.T, w, h int, dpr float64) *fxTab {
	t.Helper()
	bin := firefox(t)
	ctx, cancel := context.WithTimeoutCause(t.Context(), browserTimeout, fmt.Errorf("the Firefox test took over %v", browserTimeout))
	t.Cleanup(cancel)

	profile, err := os.MkdirTemp("", "taskd-firefox-")
	if err != nil {
		t.Fatal(err)
	}
	var prefs strings.Builder
	for name, v := range firefoxPrefs {
		b, _ := json.Marshal(v)
		fmt.Fprintf(&prefs, "user_pref(%q, %s);\n", name, b)
	}
	if err := os.WriteFile(filepath.Join(profile, "user.js"), []byte(prefs.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	// Port 0: Firefox picks a free loopback port and says which on stderr.
	cmd := exec.Command(bin, "--headless", "--no-remote", "--profile", profile,
		"--remote-debugging-port=0", fmt.Sprintf("--window-size=%d,%d", w, h), "about:blank")
	cmd.Env = append(os.Environ(), "MOZ_CRASHREPORTER_DISABLE=1")
	// Its own process group, so that stopping it stops its content
	// processes too; and it dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(profile)
		t.Fatalf("start firefox: %v", err)
	}
	var output outputTail
	listening := make(chan string, 1)
	stderrDone := make(chan struct{}) // closed when every process of it closed stderr
	go func() {
		defer close(stderrDone)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			output.add(line)
			if m := bidiListening.FindStringSubmatch(line); m != nil {
				select {
				case listening <- m[1]:
				default:
				}
			}
		}
	}()

	tb := &fxTab{t: t, ctx: ctx, logged: make(chan struct{}, 1)}
	// Stop: end the session, close the connection, stop the process group
	// and remove the profile. Until Wait reaps Firefox, its pid (the group's
	// id) cannot be reused, so the signals reach only its own processes.
	t.Cleanup(func() {
		if tb.c != nil {
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := tb.c.call(sctx, "session.end", nil, nil); err != nil {
				t.Logf("firefox: %v", err)
			}
			scancel()
			tb.c.close()
		}
		pid := cmd.Process.Pid
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		deadline := time.Now().Add(10 * time.Second)
		for !exited(pid) {
			if time.Now().After(deadline) {
				t.Logf("firefox (pid %d) did not stop in 10s; killing it", pid)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		// Whatever is left of the group: content processes, or all of it.
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		select {
		case <-stderrDone:
		case <-time.After(5 * time.Second):
		}
		_ = cmd.Wait()
		if err := os.RemoveAll(profile); err != nil {
			t.Errorf("remove the firefox profile: %v", err)
		}
	})

	var wsURL string
	select {
	case wsURL = <-listening:
	case <-stderrDone:
		t.Fatalf("firefox exited before its BiDi server listened:\n%s", output.String())
	case <-ctx.Done():
		t.Fatalf("firefox's BiDi server did not listen: %v:\n%s", context.Cause(ctx), output.String())
	}
	ws, err := dialWS(ctx, wsURL+"/session")
	if err != nil {
		t.Fatalf("connect to firefox: %v:\n%s", err, output.String())
	}
	tb.c = newBidiClient(ws, tb.onEvent)

	var sess struct {
		Capabilities struct {
			BrowserName    string `json:"browserName"`
			BrowserVersion string `json:"browserVersion"`
		} `json:"capabilities"`
	}
	tb.call("new session", "session.new", map[string]any{"capabilities": map[string]any{}}, &sess)
	t.Logf("%s %s over WebDriver BiDi", sess.Capabilities.BrowserName, sess.Capabilities.BrowserVersion)
	tb.call("subscribe to the log", "session.subscribe", map[string]any{"events": []string{"log.entryAdded"}}, nil)

	var tree struct {
		Contexts []struct {
			Context string `json:"context"`
		} `json:"contexts"`
	}
	tb.call("list the tabs", "browsingContext.getTree", map[string]any{"maxDepth": 0}, &tree)
	if len(tree.Contexts) > 0 {
		tb.bc = tree.Contexts[0].Context
	} else {
		var created struct {
			Context string `json:"context"`
		}
		tb.call("open a tab", "browsingContext.create", map[string]any{"type": "tab"}, &created)
		tb.bc = created.Context
	}
	tb.call("set the viewport", "browsingContext.setViewport", map[string]any{
		"context":          tb.bc,
		"viewport":         map[string]int{"width": w, "height": h},
		"devicePixelRatio": dpr,
	}, nil)

	t.Cleanup(func() {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		if len(tb.problems) > 0 {
			t.Errorf("firefox logged: %q", tb.problems)
		}
	})
	return tb
}

// exited reports whether the process has exited (a zombie, not yet
// reaped) or is gone.
func exited(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// outputTail keeps the last lines a process wrote, for error messages.
type outputTail struct {
	mu    sync.Mutex
	lines []string
}

func (o *outputTail) add(line string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, line)
	if len(o.lines) > 40 {
		o.lines = o.lines[len(o.lines)-40:]
	}
}

func (o *outputTail) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.lines, "\n")
}

// onEvent records the log entries that are errors, and anything about the
// Content-Security-Policy, whatever its level.
func (tb *fxTab) onEvent(method string, params json.RawMessage) {
	if method != "log.entryAdded" {
		return
	}
	var e struct {
		Type   string `json:"type"`
		Level  string `json:"level"`
		Text   string `json:"text"`
		Source struct {
			Context string `json:"context"`
		} `json:"source"`
	}
	if err := json.Unmarshal(params, &e); err != nil {
		return
	}
	tb.t.Logf("firefox log: %s %s: %s", e.Type, e.Level, e.Text)
	if e.Level != "error" && !strings.Contains(e.Text, "Content-Security-Policy") {
		return
	}
	tb.mu.Lock()
	tb.problems = append(tb.problems, e.Type+" "+e.Level+": "+e.Text)
	tb.mu.Unlock()
	select {
	case tb.logged <- struct{}{}:
	default:
	}
}

// call sends a BiDi command, failing the test on an error.
func (tb *fxTab) call(what, method string, params, out any) {
	tb.t.Helper()
	if err := tb.c.call(tb.ctx, method, params, out); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// navigate loads url in the tab and waits for its load event.
func (tb *fxTab) navigate(url string) {
	tb.t.Helper()
	tb.call("open "+url, "browsingContext.navigate", map[string]any{"context": tb.bc, "url": url, "wait": "complete"}, nil)
}

// evaluate runs a script in the page and returns the JSON of the value of
// the promise it evaluates to. With user set, the browser treats the
// script as the user's action (user activation).
func (tb *fxTab) evaluate(ctx context.Context, script string, user bool) (string, error) {
	var res struct {
		Type             string          `json:"type"`
		Result           json.RawMessage `json:"result"`
		ExceptionDetails struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	err := tb.c.call(ctx, "script.evaluate", map[string]any{
		"expression":      `(async () => { const v = await (async () => { ` + script + ` })(); return v === undefined ? "null" : JSON.stringify(v); })()`,
		"target":          map[string]string{"context": tb.bc},
		"awaitPromise":    true,
		"resultOwnership": "none",
		"userActivation":  user,
	}, &res)
	if err != nil {
		return "", err
	}
	if res.Type == "exception" {
		return "", errors.New("the script threw: " + res.ExceptionDetails.Text)
	}
	return remoteString(res.Result)
}

// run runs the body of an async function in the page as the user's action,
// failing the test if it throws.
func (tb *fxTab) run(what, body string) {
	tb.t.Helper()
	if _, err := tb.evaluate(tb.ctx, body, true); err != nil {
		tb.t.Fatalf("%s: %v", what, err)
	}
}

// fxEval returns the value of a JavaScript expression.
func fxEval[T any](tb *fxTab, expr string) T {
	tb.t.Helper()
	var v T
	out, err := tb.evaluate(tb.ctx, "return ("+expr+");", false)
	if err != nil {
		tb.t.Fatalf("evaluate %s: %v", expr, err)
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		tb.t.Fatalf("evaluate %s: %v: %s", expr, err, out)
	}
	return v
}

// waitJS waits until the JavaScript expression is truthy. The page itself
// checks it every 25 ms, for 5 s per round trip; a navigation ends a round
// early, and the next one checks the new page.
func (tb *fxTab) waitJS(what, expr string) {
	tb.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	poll := `const until = Date.now() + 5000; let last = "";
		for (;;) {
			try { if (` + expr + `) { return "ok"; } last = ""; } catch (e) { last = String(e); }
			if (Date.now() > until) { return last || "false"; }
			await new Promise(r => setTimeout(r, 25));
		}`
	var last string
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(tb.ctx, 15*time.Second)
		out, err := tb.evaluate(ctx, poll, false)
		cancel()
		switch {
		case err == nil && out == `"ok"`:
			return
		case err == nil:
			last = "still " + out
		default:
			// The page went away under the script (Firefox mostly runs
			// it in the next one instead): try again shortly.
			last = err.Error()
			select {
			case <-time.After(50 * time.Millisecond):
			case <-tb.ctx.Done():
			}
		}
		if tb.ctx.Err() != nil {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(tb.ctx), 5*time.Second)
	defer cancel()
	text, _ := tb.evaluate(ctx, `return document.body ? document.body.innerText : "";`, false)
	tb.t.Fatalf("waiting for %s (%s): %s; the page says:\n%s", what, expr, last, text)
}

// typeInto types text into the field as a user would: it takes the focus,
// and each character is an input event.
func (tb *fxTab) typeInto(selector, text string) {
	tb.t.Helper()
	tb.run("type into "+selector, `const el = document.querySelector(`+js(selector)+`);
		if (!el) { throw new Error("no element " + `+js(selector)+`); }
		el.focus();
		for (const ch of `+js(text)+`) {
			el.value += ch;
			el.dispatchEvent(new InputEvent("input", {bubbles: true, inputType: "insertText", data: ch}));
		}
		el.dispatchEvent(new Event("change", {bubbles: true}));`)
}

// click focuses the element and clicks it, as a pointer press does.
func (tb *fxTab) click(selector string) {
	tb.t.Helper()
	tb.run("click "+selector, `const el = document.querySelector(`+js(selector)+`);
		if (!el) { throw new Error("no element " + `+js(selector)+`); }
		if (el.disabled) { throw new Error(`+js(selector)+` + " is disabled"); }
		el.focus();
		el.click();`)
}

// screenshot writes the whole page as name.png to the artifacts directory.
func (tb *fxTab) screenshot(name string) string {
	tb.t.Helper()
	var shot struct {
		Data string `json:"data"`
	}
	tb.call("screenshot", "browsingContext.captureScreenshot", map[string]any{"context": tb.bc, "origin": "document"}, &shot)
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		tb.t.Fatalf("screenshot: %v", err)
	}
	return writeArtifact(tb.t, name, png)
}

// takeProblems waits until the page has logged at least n problems, and
// returns them; they no longer fail the test.
func (tb *fxTab) takeProblems(n int) []string {
	tb.t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		tb.mu.Lock()
		if len(tb.problems) >= n {
			p := tb.problems
			tb.problems = nil
			tb.mu.Unlock()
			return p
		}
		got := append([]string(nil), tb.problems...)
		tb.mu.Unlock()
		select {
		case <-tb.logged:
		case <-timeout.C:
			tb.t.Fatalf("firefox logged %q, want %d problems", got, n)
		case <-tb.ctx.Done():
			tb.t.Fatalf("firefox logged %q, want %d problems: %v", got, n, context.Cause(tb.ctx))
		}
	}
}

// signInAt opens the sign-in page at path (the workspace's / or the
// console's /ops), types the token and presses the button.
func (tb *fxTab) signInAt(s *server, path, token string) {
	tb.t.Helper()
	tb.navigate(s.base + path)
	tb.waitJS("the sign-in form", `document.activeElement === document.getElementById("token")`)
	tb.typeInto("#token", token)
	tb.click(`main form button[type="submit"]`)
}

// signIn signs in to the workspace with an editor's token and waits for it.
func (tb *fxTab) signIn(s *server, token string) {
	tb.t.Helper()
	tb.signInAt(s, "/", token)
	tb.waitJS("the workspace", `document.body.hasAttribute("data-state")`)
}

// opsSignIn signs in to the console with the admin token and waits for its
// first refresh.
func (tb *fxTab) opsSignIn(s *server) {
	tb.t.Helper()
	tb.signInAt(s, "/ops", adminToken)
	tb.waitJS("the console", `document.body.classList.contains("ops") && document.getElementById("updated").textContent.startsWith("updated")`)
}

// showing waits until the workspace shows the task with this title.
func (tb *fxTab) showing(title string) {
	tb.t.Helper()
	tb.waitJS("task "+title, `document.body.dataset.state === "task" && document.getElementById("t-title").textContent === `+js(title))
}

// TestFirefoxSeesPageErrors: the log the Firefox tests check does report an
// uncaught exception and a Content-Security-Policy violation (an inline
// script, which the policy blocks), so a page without them is one that
// has none.
func TestFirefoxSeesPageErrors(t *testing.T) {
	s := startServer(t, taskd.Config{})
	tb := newFirefox(t, 1280, 900, 1)
	tb.navigate(s.base + "/")
	tb.run("break the rules", `const s = document.createElement("script");
		s.textContent = "window.inlineRan = true";
		document.body.appendChild(s);
		setTimeout(() => { throw new Error("thrown on purpose"); }, 0);`)
	got := strings.Join(tb.takeProblems(2), "\n")
	if !strings.Contains(got, "Content-Security-Policy") || !strings.Contains(got, "thrown on purpose") {
		t.Errorf("firefox logged %q: want the CSP violation and the exception", got)
	}
	if fxEval[bool](tb, `window.inlineRan === true`) {
		t.Errorf("the inline script ran despite the policy")
	}
}

// TestFirefoxEditorCycle: in Firefox, an editor signs in through the form,
// gets a task with its payload rendered, submits it with a decision and
// notes and sees the next at once; after the last, the page waits, and
// work that arrives meanwhile shows up.
func TestFirefoxEditorCycle(t *testing.T) {
	s := startServer(t, taskd.Config{})
	_, token := s.editor("Ada Editor", "news")
	first := s.addTask("news", 9, "Council votes on the budget", map[string]any{
		"text":   "The council met on Tuesday.\n\nIt voted 7 to 2.",
		"source": "wire", "words": 812,
	})
	second := s.addTask("news", 1, "Harbour reopens", map[string]any{"body": "Ships are back."})

	tb := newFirefox(t, 1280, 900, 1)
	tb.signIn(s, token)
	tb.showing("Council votes on the budget")
	if got := fxEval[[]string](tb, `Array.from(document.querySelectorAll("#t-text p")).map(p => p.textContent)`); strings.Join(got, "|") != "The council met on Tuesday.|It voted 7 to 2." {
		t.Errorf("text paragraphs %q", got)
	}
	if got := fxEval[string](tb, `Array.from(document.querySelectorAll("#t-fields dt, #t-fields dd")).map(e => e.textContent).join("|")`); got != "source|wire|words|812" {
		t.Errorf("fields %q", got)
	}
	tb.waitJS("the lease countdown", `/^\d+:\d\d$/.test(document.getElementById("t-lease").textContent)`)
	tb.screenshot("firefox-workspace-desktop")

	tb.click(`input[name="decision"][value="reject"]`)
	tb.typeInto("#notes", "duplicate of yesterday's")
	tb.click("#b-submit")
	tb.showing("Harbour reopens")
	if got := fxEval[string](tb, `document.getElementById("task").dataset.task`); got != itoa(second) {
		t.Errorf("showing task %s, want %d", got, second)
	}
	var task struct {
		Status string          `json:"status"`
		Result json.RawMessage `json:"result"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(first), nil, http.StatusOK, &task)
	if task.Status != "done" || !strings.Contains(string(task.Result), `"decision":"reject"`) || !strings.Contains(string(task.Result), `duplicate of yesterday's`) {
		t.Errorf("first task %s, result %s: want done with the decision and notes", task.Status, task.Result)
	}
	tb.waitJS("today's count", `document.getElementById("today").textContent.includes("1 submitted")`)

	tb.click(`input[name="decision"][value="escalate"]`)
	tb.click("#b-submit")
	tb.waitJS("the calm waiting state", `document.body.dataset.state === "waiting" && !document.getElementById("waiting").hidden && document.getElementById("task").hidden`)
	s.admin("GET", "/v1/tasks/"+itoa(second), nil, http.StatusOK, &task)
	if task.Status != "done" || !strings.Contains(string(task.Result), `"decision":"escalate"`) {
		t.Errorf("second task %s, result %s: want done, escalated", task.Status, task.Result)
	}
	tb.screenshot("firefox-workspace-waiting")
	// Work that arrives while the page waits shows up through the long poll.
	s.addTask("news", 1, "Late arrival", map[string]any{"text": "Arrived while waiting."})
	tb.showing("Late arrival")
}

// TestFirefoxOpsConsole: in Firefox, the admin signs in to /ops through the
// form and sees the pool by category and status with the right counts;
// pauses a category from the console and sees it listed paused (and the
// store has it paused); force-releases a live claim, which ends it for its
// holder.
func TestFirefoxOpsConsole(t *testing.T) {
	s := startServer(t, liveClaims())
	_, ada := s.editor("Ada Editor", "news")
	_, bo := s.editor("Bo", "sport")
	for i := range 3 {
		s.addTask("news", 3-i, fmt.Sprintf("News item %d", i+1), map[string]any{"text": "x"})
	}
	for i := range 2 {
		s.addTask("sport", 1, fmt.Sprintf("Match report %d", i+1), map[string]any{"text": "y"})
	}
	newsID, newsFence := claimFor(t, s, ada)
	sportID, fence := claimFor(t, s, bo)
	// Bo submits, and is handed the second sport task.
	editorCall(t, s, bo, "POST", "/v1/assignments/"+itoa(sportID)+"/submit", `{"fence":`+itoa(fence)+`,"result":{"decision":"approve"}}`, http.StatusOK, nil)

	tb := newFirefox(t, 1280, 1000, 1)
	tb.opsSignIn(s)
	for _, c := range []struct{ category, status, want string }{
		{"news", "pending", "2"}, {"news", "assigned", "1"}, {"news", "done", "0"},
		{"sport", "pending", "0"}, {"sport", "assigned", "1"}, {"sport", "done", "1"},
	} {
		tb.waitJS(c.category+" "+c.status+" = "+c.want, cell(c.category, c.status)+` === `+js(c.want))
	}
	tb.waitJS("two live claims", `document.querySelectorAll("#claims-table tbody tr").length === 2`)
	row := `document.querySelector('#claims-table tr[data-task="` + itoa(newsID) + `"]')`
	if got := fxEval[string](tb, row+`.cells[3].textContent`); got != "Ada Editor" {
		t.Errorf("holder of task %d: %q, want Ada Editor", newsID, got)
	}
	tb.waitJS("a ticking lease", `/^\d+:\d\d$/.test(`+row+`.cells[5].textContent)`)
	// The history shows the claims once the engine has flushed them.
	tb.waitJS("the last hour's counts", `document.getElementById("hour-kpis").textContent.includes("claims 3") && document.getElementById("hour-kpis").textContent.includes("submits 1")`)
	if n := fxEval[int](tb, `document.querySelectorAll("#chart-rate rect.bar-claims").length`); n < 1 {
		t.Errorf("%d bars in the claims chart", n)
	}
	tb.screenshot("firefox-ops-desktop")

	tb.click(`#pool-table button[data-key="pause:sport"]`)
	tb.waitJS("sport listed paused", `document.querySelector('#pool-table tr[data-category="sport"] .tag.paused') !== null`)
	tb.typeInto("#pause-cat", "archive")
	tb.click(`#pause-form button[type="submit"]`)
	tb.waitJS("archive listed paused", `document.querySelector('#pool-table tr[data-category="archive"] .tag.paused') !== null && `+cell("archive", "pending")+` === "0"`)
	var paused struct {
		Paused []struct {
			Category string `json:"category"`
		} `json:"paused"`
	}
	s.admin("GET", "/v1/admin/categories/paused", nil, http.StatusOK, &paused)
	if len(paused.Paused) != 2 || paused.Paused[0].Category != "archive" || paused.Paused[1].Category != "sport" {
		t.Fatalf("paused %+v, want archive and sport", paused.Paused)
	}

	button := `#claims-table tr[data-task="` + itoa(newsID) + `"] button`
	tb.click(button)
	tb.waitJS("the confirm question", `document.querySelector('`+button+`').textContent === "Confirm"`)
	tb.click(button)
	tb.waitJS("the console's notice", `document.getElementById("status").textContent.includes("Task #`+itoa(newsID)+` was taken back from Ada Editor")`)
	tb.waitJS("the claim gone", `document.querySelectorAll("#claims-table tbody tr").length === 1 && `+row+` === null`)
	tb.waitJS("news pending = 3", cell("news", "pending")+` === "3"`)
	var task struct {
		Status  string `json:"status"`
		History []struct {
			Kind string `json:"kind"`
		} `json:"history"`
	}
	s.admin("GET", "/v1/tasks/"+itoa(newsID), nil, http.StatusOK, &task)
	released := false
	for _, ev := range task.History {
		released = released || ev.Kind == "released"
	}
	if task.Status != "pending" || !released {
		t.Errorf("task %d is %s with history %+v: want pending, released", newsID, task.Status, task.History)
	}
	// The claim is over for its holder.
	editorCall(t, s, ada, "POST", "/v1/assignments/"+itoa(newsID)+"/heartbeat", `{"fence":`+itoa(newsFence)+`}`, http.StatusConflict, nil)
}

// TestFirefoxPhoneWidth: in Firefox at 390×844, the sign-in page, the
// workspace and the console's pool and task views fit the width (nothing
// scrolls sideways); screenshots of each are written as artifacts.
func TestFirefoxPhoneWidth(t *testing.T) {
	s := startServer(t, liveClaims())
	_, cy := s.editor("Cy", "news")
	_, gus := s.editor("Gus", "sport")
	s.addTask("news", 3, "A fairly long headline about the regional transport plan and its budget", map[string]any{
		"text":   "The plan covers buses, trams and two new ferry routes.\n\nThe first phase starts in spring; the second depends on the vote in June.",
		"source": "regional desk", "section": "transport", "url": "https://example.com/a/very/long/path/that/should/wrap/and/not/overflow",
	})
	for i := range 4 {
		s.addTask("news", i, "A long headline about the regional transport plan, part "+itoa(int64(i+1)), map[string]any{"text": "x"})
	}
	sportID := s.addTask("sport", 1, "Match report with a long headline about the final and its aftermath", map[string]any{"text": "y"})
	claimFor(t, s, gus)

	tb := newFirefox(t, 390, 844, 2)
	fits := func(view string) {
		t.Helper()
		if w := fxEval[int](tb, `window.innerWidth`); w != 390 {
			t.Fatalf("%s: the viewport is %dpx wide, want 390", view, w)
		}
		if w := fxEval[int](tb, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s is %dpx wide at a 390px viewport", view, w)
		}
		// A table's box is as tall as its table: content taller than the
		// box is cut off (1px is sub-pixel rounding, not a scrollbar).
		if cut := fxEval[[]string](tb, `Array.from(document.querySelectorAll(".scroll")).filter(b => b.offsetParent !== null && b.scrollHeight > b.clientHeight + 1).map(b => b.firstElementChild.id + ": " + b.scrollHeight + "px in " + b.clientHeight + "px")`); len(cut) > 0 {
			t.Errorf("%s cuts off content: %q", view, cut)
		}
	}
	tb.navigate(s.base + "/")
	fits("the sign-in page")
	tb.screenshot("firefox-signin-phone")

	tb.signIn(s, cy)
	tb.showing("A fairly long headline about the regional transport plan and its budget")
	fits("the workspace")
	tb.screenshot("firefox-workspace-phone")

	tb.opsSignIn(s)
	tb.waitJS("the claims", `document.querySelector('#claims-table tr[data-task="`+itoa(sportID)+`"]') !== null`)
	fits("the console's pool")
	// Its tables may scroll inside their boxes, but the pool's five columns
	// and buttons fit, even beside a scrollbar that takes room from the page.
	if got := fxEval[[]int](tb, `[document.getElementById("pool-table").scrollWidth, document.getElementById("pool-table").parentElement.clientWidth]`); got[0] > got[1] {
		t.Errorf("the pool table is %dpx wide in a box of %dpx", got[0], got[1])
	}
	tb.screenshot("firefox-ops-phone")
	tb.navigate(s.base + "/ops#tasks/" + itoa(sportID))
	tb.waitJS("the task detail", `!document.getElementById("task-detail").hidden && document.getElementById("td-payload").textContent !== ""`)
	fits("the console's task view")
	tb.screenshot("firefox-ops-task-phone")
}
