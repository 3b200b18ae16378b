package main

// End-to-end tests: they build the real binary once, run it against the test
// services with environment overrides (a database, a Redis key prefix and an
// admin token of their own), and talk to it over HTTP and signals.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/apispec"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

const e2eAdminToken = "e2e-admin-token-0123456789abcdefghijkl"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// taskdBin builds the binary once per test run (with -race when the tests
// have it) and returns its path.
func taskdBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "taskd-e2e-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "taskd")
		args := []string{"build", "-o", binPath}
		if raceBuild {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// baseEnv is the process environment without any TASKD_ variable, so that
// nothing from the caller's shell reaches the binary.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKD_") {
			env = append(env, kv)
		}
	}
	return env
}

// servicesEnv is the environment that points taskd at the test services: a
// fresh database of its own and a unique Redis key prefix.
func servicesEnv(t *testing.T) []string {
	t.Helper()
	env := []string{"TASKD_MYSQL_DSN=" + storetest.NewDatabase(t)}
	return append(append(env, redisEnv(t)...), "TASKD_ADMIN_TOKEN="+e2eAdminToken)
}

// redisEnv is the environment that points taskd at the test Redis, with a
// unique key prefix.
func redisEnv(t *testing.T) []string {
	t.Helper()
	opt, err := redis.ParseURL(testenv.Lookup(t, testenv.RedisURLVar))
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.RedisURLVar, err)
	}
	return []string{
		"TASKD_REDIS_ADDRS=" + opt.Addr,
		"TASKD_REDIS_KEY_PREFIX=" + "e2e:" + strings.ToLower(rand.Text()[:10]) + ":",
	}
}

// run runs the binary to completion in an empty directory (no config.yaml)
// and returns its output and exit status.
func run(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, taskdBin(t), args...)
	cmd.Dir = t.TempDir()
	cmd.Env = append(baseEnv(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	default:
		t.Fatalf("run taskd %v: %v", args, err)
	}
	return out.String(), errOut.String(), code
}

// proc is a running taskd process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdout *testenv.LockedBuffer
	stderr *testenv.LockedBuffer
	done   chan struct{} // closed when it exited
	err    error         // Wait's result, once done
}

// start starts the binary with env in the background; it is killed when the
// test ends, if still running.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, stdout: &testenv.LockedBuffer{}, stderr: &testenv.LockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(taskdBin(t), args...)
	p.cmd.Dir = t.TempDir()
	p.cmd.Env = append(baseEnv(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start taskd: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("taskd %v stderr:\n%s", args, p.stderr.String())
		}
	})
	return p
}

// stop sends sig and waits up to limit for the exit; it returns the exit
// status.
func (p *proc) stop(sig os.Signal, limit time.Duration) int {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(limit):
		p.t.Fatalf("taskd did not exit within %v of %v", limit, sig)
	}
	var exitErr *exec.ExitError
	if errors.As(p.err, &exitErr) {
		return exitErr.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("wait: %v", p.err)
	}
	return 0
}

// waitLog waits until the JSON log has a line with msg, and returns it.
func (p *proc) waitLog(msg string, limit time.Duration) map[string]any {
	p.t.Helper()
	var found map[string]any
	testenv.Eventually(p.t, limit, fmt.Sprintf("%q in the log", msg), func() bool {
		sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
		for sc.Scan() {
			var line map[string]any
			if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == msg {
				found = line
				return true
			}
		}
		select {
		case <-p.done:
			p.t.Fatalf("taskd exited (%v) before logging %q:\n%s", p.err, msg, p.stderr.String())
		default:
		}
		return false
	})
	return found
}

// server is a running `taskd serve`.
type server struct {
	*proc
	base string
	// spec is the OpenAPI document the server serves; every answer call
	// reads is checked against it.
	spec *apispec.Spec
}

// startServer runs `taskd serve` against the test services with extra env,
// and waits until GET /healthz answers.
func startServer(t *testing.T, extra ...string) *server {
	t.Helper()
	env := append(servicesEnv(t),
		"TASKD_HTTP_ADDR=127.0.0.1:0", // the log says which port
		"TASKD_HTTP_SHUTDOWN_TIMEOUT=10s",
		"TASKD_LOG_FORMAT=json",
		"TASKD_LOG_LEVEL=debug",
		"TASKD_SWEEP_INTERVAL=1s",
	)
	p := start(t, append(env, extra...), "serve")
	line := p.waitLog("serving", 60*time.Second)
	addr, _ := line["addr"].(string)
	s := &server{proc: p, base: "http://" + addr}
	testenv.Eventually(t, 10*time.Second, "GET /healthz answers 200", func() bool {
		resp, err := http.Get(s.base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	s.spec = loadSpec(t, s.base)
	return s
}

// loadSpec reads the OpenAPI document a server serves.
func loadSpec(t *testing.T, base string) *apispec.Spec {
	t.Helper()
	resp, err := http.Get(base + "/v1/openapi.json")
	if err != nil {
		t.Fatalf("GET /v1/openapi.json: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/openapi.json: status %d, %v", resp.StatusCode, err)
	}
	spec, err := apispec.Load(b)
	if err != nil {
		t.Fatalf("the served OpenAPI document: %v", err)
	}
	return spec
}

// call sends a request with a bearer token (none when token is "") and a body
// (JSON-encoded unless it is a string or []byte), and returns the status and
// the body.
func (s *server) call(method, path, token string, body any) (int, []byte) {
	s.t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, s.base+path, r)
	if err != nil {
		s.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	if err := s.spec.CheckResponse(req, resp.StatusCode, resp.Header, out); err != nil && !errors.Is(err, apispec.ErrNoRoute) {
		s.t.Errorf("openapi: %v", err)
	}
	return resp.StatusCode, out
}

// expect is call that fails the test unless the status is want; it decodes
// a JSON answer into out when out is not nil.
func (s *server) expect(want int, method, path, token string, body, out any) {
	s.t.Helper()
	status, b := s.call(method, path, token, body)
	if status != want {
		s.t.Fatalf("%s %s: status %d, want %d: %s", method, path, status, want, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			s.t.Fatalf("%s %s: decode %s: %v", method, path, b, err)
		}
	}
}

// errorCode returns the code of a JSON error answer.
func errorCode(b []byte) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return e.Error.Code
}

type editorJSON struct {
	ID    int64  `json:"id"`
	Token string `json:"token"`
}

type assignmentJSON struct {
	Task struct {
		ID       int64  `json:"id"`
		Category string `json:"category"`
		Title    string `json:"title"`
	} `json:"task"`
	Fence          int64  `json:"fence"`
	LeaseExpiresAt string `json:"lease_expires_at"`
}

func (s *server) createEditor(name string, categories ...string) editorJSON {
	s.t.Helper()
	var e editorJSON
	s.expect(http.StatusCreated, "POST", "/v1/editors", e2eAdminToken, map[string]any{"name": name, "categories": categories}, &e)
	if e.Token == "" {
		s.t.Fatalf("editor %s: no token", name)
	}
	return e
}

func (s *server) addTasks(ts ...map[string]any) []int64 {
	s.t.Helper()
	var out struct {
		IDs []int64 `json:"ids"`
	}
	s.expect(http.StatusCreated, "POST", "/v1/tasks", e2eAdminToken, ts, &out)
	if len(out.IDs) != len(ts) {
		s.t.Fatalf("added %d tasks, got %d ids", len(ts), len(out.IDs))
	}
	return out.IDs
}

func TestE2EAPI(t *testing.T) {
	t.Parallel()
	s := startServer(t)

	alice := s.createEditor("alice", "news")
	bob := s.createEditor("bob", "news")
	ids := s.addTasks(
		map[string]any{"category": "news", "title": "First", "priority": 5, "payload": map[string]any{"text": "one"}},
		map[string]any{"category": "news", "title": "Second", "priority": 1},
		map[string]any{"category": "news", "title": "Third", "priority": 0},
	)

	// Alice gets the highest priority task; asking again returns the same claim.
	var a1 assignmentJSON
	s.expect(http.StatusOK, "POST", "/v1/assignments/next", alice.Token, map[string]any{}, &a1)
	if a1.Task.ID != ids[0] || a1.Task.Title != "First" || a1.Fence < 1 {
		t.Fatalf("alice's assignment = %+v, want task %d", a1, ids[0])
	}
	var again assignmentJSON
	s.expect(http.StatusOK, "POST", "/v1/assignments/next", alice.Token, nil, &again)
	if again.Task.ID != a1.Task.ID || again.Fence != a1.Fence {
		t.Errorf("asking again gave %+v, want the held claim %+v", again, a1)
	}

	hb := fmt.Sprintf("/v1/assignments/%d/heartbeat", a1.Task.ID)
	var lease struct {
		LeaseExpiresAt string `json:"lease_expires_at"`
	}
	s.expect(http.StatusOK, "POST", hb, alice.Token, map[string]any{"fence": a1.Fence}, &lease)
	if lease.LeaseExpiresAt == "" {
		t.Error("heartbeat answered no lease_expires_at")
	}

	// A fence alice never held is 403, and so is another editor's claim; no
	// token is 401. (A claim alice held and lost is 409: see below.)
	status, body := s.call("POST", hb, alice.Token, map[string]any{"fence": a1.Fence + 1})
	if status != http.StatusForbidden || errorCode(body) != "forbidden" {
		t.Errorf("a fence never held: %d %s, want 403 forbidden", status, body)
	}
	status, body = s.call("POST", hb, bob.Token, map[string]any{"fence": a1.Fence})
	if status != http.StatusForbidden {
		t.Errorf("bob on alice's claim: %d %s, want 403", status, body)
	}
	status, body = s.call("POST", fmt.Sprintf("/v1/assignments/%d/submit", a1.Task.ID), bob.Token, map[string]any{"fence": a1.Fence, "result": "x"})
	if status != http.StatusForbidden {
		t.Errorf("bob submitting alice's claim: %d %s, want 403", status, body)
	}
	if status, body = s.call("POST", "/v1/assignments/next", "", nil); status != http.StatusUnauthorized {
		t.Errorf("no token: %d %s, want 401", status, body)
	}
	if status, body = s.call("POST", "/v1/editors", alice.Token, map[string]any{"name": "x", "categories": []string{"a"}}); status != http.StatusForbidden {
		t.Errorf("editor token on an admin route: %d %s, want 403", status, body)
	}
	if status, body = s.call("GET", "/v1/stats", "not-a-token", nil); status != http.StatusUnauthorized {
		t.Errorf("unknown token: %d %s, want 401", status, body)
	}

	// Malformed requests are 400.
	for name, b := range map[string]string{
		"bad JSON":      `{"fence": `,
		"unknown field": fmt.Sprintf(`{"fence": %d, "colour": "red"}`, a1.Fence),
		"oversized":     `{"fence": 1, "reason": "` + strings.Repeat("x", 1<<20+1) + `"}`,
	} {
		path := fmt.Sprintf("/v1/assignments/%d/release", a1.Task.ID)
		if status, body := s.call("POST", path, alice.Token, b); status != http.StatusBadRequest || errorCode(body) != "bad_request" {
			t.Errorf("%s: %d %.200s, want 400 bad_request", name, status, body)
		}
	}

	// Bob takes the next one and releases it; alice submits and gets the next.
	var b1 assignmentJSON
	s.expect(http.StatusOK, "POST", "/v1/assignments/next", bob.Token, nil, &b1)
	if b1.Task.ID != ids[1] {
		t.Fatalf("bob's assignment = task %d, want %d", b1.Task.ID, ids[1])
	}
	s.expect(http.StatusNoContent, "POST", fmt.Sprintf("/v1/assignments/%d/release", b1.Task.ID), bob.Token,
		map[string]any{"fence": b1.Fence, "reason": "not mine"}, nil)
	status, body = s.call("POST", fmt.Sprintf("/v1/assignments/%d/heartbeat", b1.Task.ID), bob.Token, map[string]any{"fence": b1.Fence})
	if status != http.StatusConflict {
		t.Errorf("heartbeat after release: %d %s, want 409", status, body)
	}

	var sub struct {
		Next *assignmentJSON `json:"next"`
	}
	s.expect(http.StatusOK, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a1.Task.ID), alice.Token,
		map[string]any{"fence": a1.Fence, "result": map[string]any{"ok": true}}, &sub)
	if sub.Next == nil || sub.Next.Task.ID != ids[1] {
		t.Fatalf("next after submit = %+v, want task %d (released by bob)", sub.Next, ids[1])
	}
	// The submitted claim is over: its fence is stale now.
	if status, _ := s.call("POST", hb, alice.Token, map[string]any{"fence": a1.Fence}); status != http.StatusConflict {
		t.Errorf("heartbeat after submit: %d, want 409", status)
	}

	var stats struct {
		ByStatus map[string]int64 `json:"by_status"`
		Live     int64            `json:"live"`
	}
	s.expect(http.StatusOK, "GET", "/v1/stats", e2eAdminToken, nil, &stats)
	if stats.ByStatus["done"] != 1 || stats.ByStatus["assigned"] != 1 || stats.ByStatus["pending"] != 1 || stats.Live != 1 {
		t.Errorf("stats = %+v, want 1 done, 1 assigned (live), 1 pending", stats)
	}
	s.expect(http.StatusOK, "GET", "/readyz", "", nil, nil)
}

func TestE2ELongPoll(t *testing.T) {
	t.Parallel()
	s := startServer(t, "TASKD_DISPATCH_POLL_INTERVAL=1m", "TASKD_HTTP_MAX_WAIT=50s")
	carol := s.createEditor("carol", "late")

	// Nothing in the pool: a short wait ends with 204.
	began := time.Now()
	if status, body := s.call("POST", "/v1/assignments/next", carol.Token, map[string]any{"wait_ms": 300}); status != http.StatusNoContent {
		t.Fatalf("empty pool: %d %s, want 204", status, body)
	}
	if waited := time.Since(began); waited < 250*time.Millisecond {
		t.Errorf("a 300ms long poll answered after %v", waited)
	}

	// A task that arrives while carol waits is handed to her at once: the poll
	// interval is a minute, so only the arrival's wake-up can end the wait
	// within the test's bound (or, had the task come before the wait began,
	// the claim attempt that starts it).
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answers := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.base+"/v1/assignments/next", strings.NewReader(`{"wait_ms": 50000}`))
		req.Header.Set("Authorization", "Bearer "+carol.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answers <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answers <- answer{resp.StatusCode, b, err}
	}()
	waitRequests(t, s, 2)
	ids := s.addTasks(map[string]any{"category": "late", "title": "Arrived"})
	select {
	case a := <-answers:
		var got assignmentJSON
		if a.err != nil || a.status != http.StatusOK || json.Unmarshal(a.body, &got) != nil || got.Task.ID != ids[0] {
			t.Fatalf("long poll answered %d %s (%v), want 200 with task %d", a.status, a.body, a.err, ids[0])
		}
	case <-time.After(45 * time.Second): // under the 50 s wait and the minute's poll
		t.Fatal("the long poll did not answer within 45s of the task's arrival")
	}
}

func TestE2EShutdown(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	dave := s.createEditor("dave", "quiet")

	// A long poll in flight is answered 204 at shutdown, well before its wait.
	answers := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("POST", s.base+"/v1/assignments/next", strings.NewReader(`{"wait_ms": 50000}`))
		req.Header.Set("Authorization", "Bearer "+dave.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			answers <- 0
			return
		}
		resp.Body.Close()
		answers <- resp.StatusCode
	}()
	waitRequests(t, s, 1)

	// The process exits within the stop's bound, under the poll's 50 s wait,
	// and the poll's 204 came before the exit: the shutdown answered it.
	if code := s.stop(syscall.SIGTERM, 40*time.Second); code != exitOK {
		t.Errorf("exit status after SIGTERM = %d, want 0\n%s", code, s.stderr.String())
	}
	select {
	case status := <-answers:
		if status != http.StatusNoContent {
			t.Errorf("long poll at shutdown answered %d, want 204", status)
		}
	case <-time.After(30 * time.Second):
		t.Error("the long poll did not answer")
	}
	s.waitLog("stopped", time.Second)
}

// waitRequests waits until the server has received n requests for an
// assignment since it started (its debug log counts them).
func waitRequests(t *testing.T, s *server, n int) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, fmt.Sprintf("the server receives %d assignment requests", n), func() bool {
		return strings.Count(s.stderr.String(), `"msg":"assignment requested"`) >= n
	})
}

func TestE2EHelp(t *testing.T) {
	t.Parallel()
	stdout, _, code := run(t, nil, "--help")
	if code != exitOK {
		t.Errorf("taskd --help: exit %d", code)
	}
	for _, c := range commands() {
		if !strings.Contains(stdout, c.name) {
			t.Errorf("taskd --help does not list %s:\n%s", c.name, stdout)
		}
		out, _, code := run(t, nil, c.name, "--help")
		// version reads nothing but the binary: it alone has no -config.
		hasConfig := strings.Contains(out, "-config")
		if code != exitOK || !strings.Contains(out, "Usage: taskd "+c.name) || hasConfig == (c.name == "version") {
			t.Errorf("taskd %s --help: exit %d, output:\n%s", c.name, code, out)
		}
	}
	out, _, _ := run(t, nil, "serve", "-h")
	if !strings.Contains(out, "http.shutdown_timeout") {
		t.Errorf("serve -h does not describe the shutdown:\n%s", out)
	}
	if _, stderr, code := run(t, nil); code != exitUsage || !strings.Contains(stderr, "Commands:") {
		t.Errorf("taskd with no command: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := run(t, nil, "frobnicate"); code != exitUsage || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: exit %d, stderr %q", code, stderr)
	}
	if _, stderr, code := run(t, nil, "status", "-nope"); code != exitUsage || !strings.Contains(stderr, "-nope") {
		t.Errorf("unknown flag: exit %d, stderr %q", code, stderr)
	}
}

func TestE2EInvalidConfig(t *testing.T) {
	t.Parallel()
	env := []string{"TASKD_MYSQL_DSN=u:p@tcp(127.0.0.1:1)/d", "TASKD_ADMIN_TOKEN=" + e2eAdminToken, "TASKD_LEASE_TTL=5ms"}
	_, stderr, code := run(t, env, "serve")
	if code != exitUsage || !strings.Contains(stderr, `config: dispatch.lease_ttl: must be at least 1s, got "5ms" (from TASKD_LEASE_TTL)`) {
		t.Errorf("TASKD_LEASE_TTL=5ms: exit %d, stderr:\n%s", code, stderr)
	}

	dir := t.TempDir()
	path := filepath.Join(dir, "taskd.yaml")
	if err := os.WriteFile(path, []byte("mysql:\n  dsn: u:p@tcp(h:1)/d\nhttp:\n  adress: :1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, code = run(t, []string{"TASKD_CONFIG=" + path}, "migrate")
	if code != exitUsage || !strings.Contains(stderr, "config: http.adress: unknown key (from taskd.yaml line 4)") {
		t.Errorf("unknown key: exit %d, stderr:\n%s", code, stderr)
	}
	if _, stderr, code = run(t, nil, "migrate", "-config", filepath.Join(dir, "missing.yaml")); code != exitUsage || !strings.Contains(stderr, "missing.yaml") {
		t.Errorf("missing config file: exit %d, stderr:\n%s", code, stderr)
	}
	// A misspelt variable is named in a warning.
	_, stderr, _ = run(t, []string{"TASKD_MYSQL_DSN=u:p@tcp(127.0.0.1:1)/d", "TASKD_LEASE_TL=5s"}, "migrate")
	if !strings.Contains(stderr, "warning: TASKD_LEASE_TL is not a taskd setting") {
		t.Errorf("misspelt variable: stderr:\n%s", stderr)
	}
	// serve needs the admin token; migrate does not.
	_, stderr, code = run(t, []string{"TASKD_MYSQL_DSN=u:p@tcp(127.0.0.1:1)/d"}, "serve")
	if code != exitUsage || !strings.Contains(stderr, "admin_token") {
		t.Errorf("serve without admin token: exit %d, stderr:\n%s", code, stderr)
	}
}

func TestE2EUnreachable(t *testing.T) {
	t.Parallel()
	env := servicesEnv(t)
	_, stderr, code := run(t, append(env, "TASKD_REDIS_ADDRS=127.0.0.1:1"), "serve")
	if code != exitFailure || !strings.Contains(stderr, "redis at 127.0.0.1:1 is unreachable") {
		t.Errorf("redis down: exit %d, stderr:\n%s", code, stderr)
	}
	_, stderr, code = run(t, append(env, "TASKD_MYSQL_DSN=taskd:x@tcp(127.0.0.1:1)/taskd"), "serve")
	if code != exitFailure || !strings.Contains(stderr, "mysql at 127.0.0.1:1/taskd is unreachable") {
		t.Errorf("mysql down: exit %d, stderr:\n%s", code, stderr)
	}
	if strings.Contains(stderr, "taskd:x@") {
		t.Errorf("the error shows the DSN's credentials:\n%s", stderr)
	}
}

func TestE2EStatus(t *testing.T) {
	t.Parallel()
	env := servicesEnv(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "t.jsonl")
	lines := `{"category":"news","title":"a"}` + "\n" + `{"category":"news","title":"b"}` + "\n" + `{"category":"sport","title":"c"}` + "\n"
	if err := os.WriteFile(path, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := run(t, env, "import", path); code != exitOK {
		t.Fatalf("import: exit %d: %s", code, stderr)
	}
	stdout, stderr, code := run(t, env, "status")
	if code != exitOK {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	for _, want := range []string{
		"CATEGORY  pending  assigned  done  dead  cancelled  total",
		"news      2        0         0     0     0          2",
		"sport     1        0         0     0     0          1",
		"(all)     3        0         0     0     0          3",
		"live                               0",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("status output lacks %q:\n%s", want, stdout)
		}
	}
	stdout, _, code = run(t, env, "status", "-json")
	var rep struct {
		Total    int64            `json:"total"`
		ByStatus map[string]int64 `json:"by_status"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &rep) != nil || rep.Total != 3 || rep.ByStatus["pending"] != 3 {
		t.Errorf("status -json: exit %d, %s", code, stdout)
	}
}

func TestE2EWork(t *testing.T) {
	t.Parallel()
	env := servicesEnv(t)
	dsn := strings.TrimPrefix(env[0], "TASKD_MYSQL_DSN=")
	ctx := context.Background()
	db, err := store.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store, err := store.New(db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{"one two three", "", "a b c d e f g", "  spaced   out  words "}
	var ts []tasks.NewTask
	for i, text := range texts {
		payload, _ := json.Marshal(map[string]string{"text": text})
		ts = append(ts, tasks.NewTask{Category: "wordcount", Title: fmt.Sprintf("count %d", i), Payload: payload})
	}
	// A payload without text fails for good (no retries needed to see it).
	ts = append(ts, tasks.NewTask{Category: "wordcount", Title: "no text", Payload: json.RawMessage(`{}`), MaxAttempts: 1})
	ids, err := store.InsertTasks(ctx, ts)
	if err != nil {
		t.Fatal(err)
	}

	p := start(t, append(env, "TASKD_LOG_FORMAT=json", "TASKD_WORKER_CONCURRENCY=2", "TASKD_LEASE_TTL=3s",
		"TASKD_WORKER_METRICS_ADDR=127.0.0.1:0"), "work")
	metricsAddr, _ := p.waitLog("serving worker metrics", 30*time.Second)["addr"].(string)
	testenv.Eventually(t, 30*time.Second, "the tasks processed", func() bool {
		st, err := store.PoolStats(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		return st.ByStatus[tasks.StatusDone] == int64(len(texts)) && st.ByStatus[tasks.StatusDead] == 1
	})
	// The worker's metrics: tasks it finished, by outcome, among others.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	exposition, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(exposition), "taskd_") {
		t.Errorf("GET /metrics: %d, no taskd_ series:\n%.2000s", resp.StatusCode, exposition)
	}
	if code := p.stop(syscall.SIGTERM, 20*time.Second); code != exitOK {
		t.Errorf("work: exit %d after SIGTERM", code)
	}
	counts := map[float64]float64{} // task id -> words
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "words counted" {
			counts[line["task_id"].(float64)] = line["words"].(float64)
		}
	}
	for i, want := range []float64{3, 0, 7, 3} {
		if got, ok := counts[float64(ids[i])]; !ok || got != want {
			t.Errorf("task %d (%q): counted %v (logged: %v), want %v", ids[i], texts[i], got, ok, want)
		}
	}
	if strings.Contains(p.stderr.String(), "spaced   out") {
		t.Error("the log shows a payload")
	}
	// The counts are the tasks' stored results too.
	for i, want := range []int{3, 0, 7, 3} {
		var result string
		if err := store.DB().GetContext(ctx, &result, "SELECT result FROM task_results WHERE task_id = ?", ids[i]); err != nil {
			t.Fatalf("result of task %d: %v", ids[i], err)
		}
		if result != fmt.Sprintf(`{"words":%d}`, want) && result != fmt.Sprintf(`{"words": %d}`, want) {
			t.Errorf("task %d: result %s, want {\"words\":%d}", ids[i], result, want)
		}
	}
	dead, err := store.GetTask(ctx, ids[len(ids)-1])
	if err != nil || dead.Status != tasks.StatusDead || !strings.Contains(dead.LastError, "no \"text\"") {
		t.Errorf("task without text: %+v, %v", dead, err)
	}
}

// TestE2ERedisModes runs serve over Redlock (three masters) and over the Redis
// Cluster, and hands out a claim through each.
func TestE2ERedisModes(t *testing.T) {
	t.Parallel()
	modes := map[string][]string{
		"redlock": {"TASKD_REDIS_ADDRS=" + strings.Join(testenv.List(t, testenv.RedlockAddrsVar)[:3], ",")},
		"cluster": {"TASKD_REDIS_ADDRS=" + strings.Join(testenv.List(t, testenv.ClusterAddrsVar), ","), "TASKD_REDIS_CLUSTER=true"},
	}
	for name, env := range modes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, env...)
			if line := s.waitLog("stores reachable", time.Second); line["redis_mode"] != name {
				t.Errorf("redis_mode = %v, want %s", line["redis_mode"], name)
			}
			ed := s.createEditor("erin", "news")
			ids := s.addTasks(map[string]any{"category": "news", "title": "Over " + name})
			var a assignmentJSON
			s.expect(http.StatusOK, "POST", "/v1/assignments/next", ed.Token, nil, &a)
			if a.Task.ID != ids[0] {
				t.Fatalf("assignment = task %d, want %d", a.Task.ID, ids[0])
			}
			s.expect(http.StatusOK, "POST", fmt.Sprintf("/v1/assignments/%d/submit", a.Task.ID), ed.Token,
				map[string]any{"fence": a.Fence, "result": "ok"}, nil)
			s.expect(http.StatusOK, "GET", "/readyz", "", nil, nil)
			if code := s.stop(syscall.SIGTERM, 20*time.Second); code != exitOK {
				t.Errorf("exit %d after SIGTERM", code)
			}
		})
	}
}

// TestE2EServeWorkers runs serve with in-process workers: a wordcount task
// added through the API is done without any editor.
func TestE2EServeWorkers(t *testing.T) {
	t.Parallel()
	s := startServer(t, "TASKD_WORKER_IN_SERVE=true", "TASKD_WORKER_CONCURRENCY=1")
	ids := s.addTasks(map[string]any{"category": "wordcount", "title": "Count", "payload": map[string]any{"text": "five words are in here"}})
	testenv.Eventually(t, time.Minute, "the task done by the in-process worker", func() bool {
		var task struct {
			Status string `json:"status"`
		}
		s.expect(http.StatusOK, "GET", fmt.Sprintf("/v1/tasks/%d", ids[0]), e2eAdminToken, nil, &task)
		return task.Status == "done"
	})
	if line := s.waitLog("words counted", 5*time.Second); line["words"] != float64(5) {
		t.Errorf("counted %v words, want 5", line["words"])
	}
	if code := s.stop(syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Errorf("exit %d after SIGTERM", code)
	}
	s.waitLog("worker stopped", time.Second)

	// A category without a handler is a configuration error.
	_, stderr, code := run(t, append(servicesEnv(t), "TASKD_WORKER_IN_SERVE=true", "TASKD_WORKER_CATEGORIES=wordcount,translate"), "serve")
	if code != exitUsage || !strings.Contains(stderr, `worker.categories: no handler for "translate"`) {
		t.Errorf("unknown worker category: exit %d, stderr:\n%s", code, stderr)
	}
}

// TestE2ETelemetry checks what serve exports: Prometheus metrics on /metrics,
// and spans, here to stdout, flushed at shutdown.
func TestE2ETelemetry(t *testing.T) {
	t.Parallel()
	s := startServer(t, "TASKD_TELEMETRY_TRACES=stdout", "TASKD_TELEMETRY_SERVICE_NAME=taskd-e2e")
	ed := s.createEditor("frank", "news")
	s.addTasks(map[string]any{"category": "news", "title": "Traced"})
	s.expect(http.StatusOK, "POST", "/v1/assignments/next", ed.Token, nil, nil)

	status, exposition := s.call("GET", "/metrics", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET /metrics: %d", status)
	}
	for _, want := range []string{"taskd_assignments", "taskd_pool_tasks", "http_server_request"} {
		if !strings.Contains(string(exposition), want) {
			t.Errorf("GET /metrics has no %s series", want)
		}
	}
	if code := s.stop(syscall.SIGTERM, 20*time.Second); code != exitOK {
		t.Fatalf("exit %d after SIGTERM", code)
	}
	spans := s.stdout.String()
	for _, want := range []string{`"Name":"POST /v1/assignments/next"`, `"Name":"dispatcher.next"`, `"taskd-e2e"`} {
		if !strings.Contains(spans, want) {
			t.Errorf("stdout spans lack %s:\n%.3000s", want, spans)
		}
	}
	if strings.Contains(spans, ed.Token) || strings.Contains(spans, e2eAdminToken) {
		t.Error("a token shows in the spans")
	}
}
