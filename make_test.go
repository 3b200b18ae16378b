package taskd_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/testenv"
)

// makePortBaseVar names the port base of the servers the Makefile tests start
// through `make run` and `make observe`. They use ports of the 100 from it: by
// default the 100 from TASKD_SERVICES_PORT_BASE (16300) + 200, clear of the set
// `make test` runs with. The k-th run (0..3) has its servers at the port base
// + k (so MariaDB on base + 6 + k, Redis on base + 79 + k) and taskd on
// base + 90 + k; `make observe`'s other servers are at base + 20 and up.
const makePortBaseVar = "TASKD_TEST_MAKE_PORT_BASE"

// makePortBase returns the port base of the Makefile tests.
func makePortBase(t *testing.T) int {
	t.Helper()
	if v := os.Getenv(makePortBaseVar); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1024 || n > 65535-100 {
			t.Fatalf("%s=%q: want a port from 1024 to 65435", makePortBaseVar, v)
		}
		return n
	}
	base := 16300
	if v := os.Getenv("TASKD_SERVICES_PORT_BASE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("TASKD_SERVICES_PORT_BASE=%q: %v", v, err)
		}
		base = n
	}
	return base + 200
}

// makeProcess is a make started by startMake in a process group of its own.
type makeProcess struct {
	cmd    *exec.Cmd
	out    *testenv.LockedBuffer
	exited chan struct{} // closed once make has exited
}

// startMake runs make with args in the repository, in a process group of its
// own, with SIGINT and SIGQUIT at their default action whatever the test
// process ignores (env --default-signal), as a supervisor or a shell starts it,
// and without the test's TASKD_* variables (but env) nor those of a make that
// runs the test (MAKEFLAGS, MAKELEVEL, MFLAGS). When the test ends, make's
// process group gets SIGKILL if make is still there, and scripts/services.sh
// takes down the servers at each of servicesBases.
func startMake(t *testing.T, env []string, servicesBases []int, args ...string) *makeProcess {
	t.Helper()
	var all []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, "TASKD_") && name != "MAKEFLAGS" && name != "MAKELEVEL" && name != "MFLAGS" {
			all = append(all, kv)
		}
	}
	cmd := exec.Command("env", append([]string{"--default-signal=INT,QUIT", "make", "--no-print-directory"}, args...)...)
	cmd.Env = append(all, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out := &testenv.LockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start make: %v", err)
	}
	m := &makeProcess{cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(m.exited) }()
	t.Cleanup(func() {
		select {
		case <-m.exited:
		default:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-m.exited
		}
		for _, base := range servicesBases {
			down := exec.Command("scripts/services.sh", "down")
			down.Env = append(all, "TASKD_SERVICES_PORT_BASE="+strconv.Itoa(base))
			if out, err := down.CombinedOutput(); err != nil {
				t.Errorf("services.sh down at %d: %v\n%s", base, err, out)
			}
		}
		if t.Failed() {
			t.Logf("make %v said:\n%s", args, out.String())
		}
	})
	return m
}

// waitHTTP waits until url answers 200, and fails the test if make exits
// first or within passes.
func (m *makeProcess) waitHTTP(t *testing.T, url string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(url)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-m.exited:
			t.Fatalf("make exited before %s answered 200 (last: %v)", url, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 within %v (last: %v)", url, within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stopsWithin sends sig to make's pid alone (to its process group, as Ctrl-C
// at a terminal does, when group), then fails the test unless make exits and
// nothing listens on any of ports within d.
func (m *makeProcess) stopsWithin(t *testing.T, sig syscall.Signal, group bool, d time.Duration, ports []int) {
	t.Helper()
	start := time.Now()
	pid := m.cmd.Process.Pid
	if group {
		pid = -pid
	}
	if err := syscall.Kill(pid, sig); err != nil {
		t.Fatalf("signal make: %v", err)
	}
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	select {
	case <-m.exited:
	case <-deadline.C:
		t.Fatalf("make still runs %v after %v to its pid; listening: %v", d, sig, listening(ports))
	}
	for {
		open := listening(ports)
		if len(open) == 0 {
			t.Logf("make and its servers stopped %v after %v", time.Since(start).Round(time.Millisecond), sig)
			return
		}
		select {
		case <-deadline.C:
			t.Fatalf("make exited, but %v after %v these ports still listen: %v", d, sig, open)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listening returns those of ports that accept a connection on 127.0.0.1.
func listening(ports []int) []int {
	var open []int
	for _, p := range ports {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), time.Second)
		if err == nil {
			_ = c.Close()
			open = append(open, p)
		}
	}
	return open
}

// TestMakeRunStopsOnASignalToMake runs `make run` with its own ports and sends
// SIGINT, then SIGTERM, to make's pid alone, as a supervisor or a script does,
// then SIGINT to make's process group, as Ctrl-C does: each time make, taskd
// dev, Redis and MariaDB must all be gone within 30 s. Not parallel, as
// TestMakeObserve is not: make builds bin/taskd for each.
func TestMakeRunStopsOnASignalToMake(t *testing.T) {
	testenv.Lookup(t, testenv.MySQLDSNVar) // make test's servers: the machine has what make run needs
	if testing.Short() {
		t.Skip("-short: make run takes seconds to start")
	}
	base := makePortBase(t)
	for i, c := range []struct {
		name  string
		sig   syscall.Signal
		group bool
	}{
		{"SIGINT to make", syscall.SIGINT, false},
		{"SIGTERM to make", syscall.SIGTERM, false},
		{"Ctrl-C", syscall.SIGINT, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			runBase := base + i
			redis, mariadb, http := runBase+79, runBase+6, base+90+i
			ports := []int{redis, mariadb, http}
			if open := listening(ports); len(open) > 0 {
				t.Fatalf("ports %v listen before make run started: another set runs at %d", open, runBase)
			}
			addr := fmt.Sprintf("127.0.0.1:%d", http)
			m := startMake(t, nil, []int{runBase}, "run",
				"RUN_PORT_BASE="+strconv.Itoa(runBase), "RUN_ADDR="+addr, "RUN_ARGS=-articles=100")
			m.waitHTTP(t, "http://"+addr+"/readyz", 3*time.Minute)
			if open := listening(ports); len(open) != len(ports) {
				t.Fatalf("make run serves, but only %v of %v listen", open, ports)
			}
			m.stopsWithin(t, c.sig, c.group, 30*time.Second, ports)
		})
	}
}

// TestMakeObserve runs `make observe` with its own ports: once it serves,
// Prometheus must have taskd's target up and both rule files of
// deploy/prometheus loaded, Jaeger's query API must answer and list taskd's
// traces, the console must link traces to it, and a SIGINT to make alone must
// stop everything within 30 s. Jaeger is the binary TASKD_JAEGER names (make
// test-jaeger sets it; scripts/jaeger.sh builds it, minutes the first time,
// which is why make test skips this test); make observe gets it the same way.
func TestMakeObserve(t *testing.T) {
	testenv.Lookup(t, testenv.MySQLDSNVar) // make test's servers: the machine has what make observe needs
	if testing.Short() {
		t.Skip("-short: make observe takes seconds to start")
	}
	if bin := os.Getenv("TASKD_JAEGER"); bin == "" {
		if os.Getenv("TASKD_TEST_REQUIRE_JAEGER") == "1" {
			t.Fatal("TASKD_JAEGER is not set, and TASKD_TEST_REQUIRE_JAEGER=1")
		}
		t.Skip("TASKD_JAEGER is not set: run make test-jaeger, or set it to a Jaeger v2 binary (scripts/jaeger.sh builds one and prints its path)")
	}
	base := makePortBase(t)
	runBase := base + 3
	addr := fmt.Sprintf("127.0.0.1:%d", base+93)
	prom := fmt.Sprintf("http://127.0.0.1:%d", runBase+20)
	jaeger := fmt.Sprintf("http://127.0.0.1:%d", runBase+21)
	ports := []int{runBase + 6, runBase + 79, base + 93, runBase + 20, runBase + 21, runBase + 22, runBase + 23, runBase + 24}
	if open := listening(ports); len(open) > 0 {
		t.Fatalf("ports %v listen before make observe started", open)
	}
	m := startMake(t, nil, []int{runBase}, "observe",
		"RUN_PORT_BASE="+strconv.Itoa(runBase), "RUN_ADDR="+addr, "RUN_ARGS=-articles=100")
	m.waitHTTP(t, "http://"+addr+"/readyz", 3*time.Minute)
	testenv.Eventually(t, 30*time.Second, "make observe prints where Prometheus and Jaeger are", func() bool {
		out := m.out.String()
		return strings.Contains(out, "Prometheus   "+prom+"/") && strings.Contains(out, "Jaeger       "+jaeger+"/")
	})

	// Prometheus scrapes taskd as job taskd, and has loaded both rule files.
	var targets struct {
		Data struct {
			ActiveTargets []struct {
				Labels    map[string]string `json:"labels"`
				ScrapeURL string            `json:"scrapeUrl"`
				Health    string            `json:"health"`
			} `json:"activeTargets"`
		} `json:"data"`
	}
	testenv.Eventually(t, 30*time.Second, "Prometheus has taskd's target up", func() bool {
		getJSON(t, prom+"/api/v1/targets", &targets)
		for _, tg := range targets.Data.ActiveTargets {
			if tg.Labels["job"] == "taskd" && tg.ScrapeURL == "http://"+addr+"/metrics" && tg.Health == "up" {
				return true
			}
		}
		return false
	})
	var rules struct {
		Data struct {
			Groups []struct {
				File  string `json:"file"`
				Rules []struct {
					Name   string `json:"name"`
					Health string `json:"health"`
				} `json:"rules"`
			} `json:"groups"`
		} `json:"data"`
	}
	getJSON(t, prom+"/api/v1/rules", &rules)
	perFile := map[string]int{}
	for _, g := range rules.Data.Groups {
		perFile[filepath.Base(g.File)] += len(g.Rules)
	}
	for _, f := range []string{"recording.rules.yml", "alerts.rules.yml"} {
		if perFile[f] == 0 {
			t.Errorf("Prometheus has no rules of deploy/prometheus/%s: %v", f, perFile)
		}
	}

	// A request to taskd makes a trace, which Jaeger lists under service taskd.
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer dev-admin-token-change-me")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/stats: %s", resp.Status)
	}
	testenv.Eventually(t, 30*time.Second, "Jaeger lists service taskd", func() bool {
		var services struct {
			Data []string `json:"data"`
		}
		getJSON(t, jaeger+"/api/services", &services)
		return slices.Contains(services.Data, "taskd")
	})

	// The console, signed in to with config.yaml's admin token, links traces to Jaeger.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	console := &http.Client{Jar: jar}
	resp, err = console.PostForm("http://"+addr+"/ops/signin", url.Values{"token": {"dev-admin-token-change-me"}})
	if err != nil {
		t.Fatal(err)
	}
	page, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("sign in to the console: %s %v", resp.Status, err)
	}
	if want := `<meta name="trace-url" content="` + jaeger + `/api/traces/{trace_id}">`; !strings.Contains(string(page), want) {
		t.Errorf("the console has no %s:\n%s", want, page)
	}

	m.stopsWithin(t, syscall.SIGINT, false, 30*time.Second, ports)
}

// getJSON decodes the JSON url answers 200 with into out.
func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	if err := json.Unmarshal([]byte(getText(t, url)), out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// getText returns what url answers 200 with.
func getText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, b)
	}
	return string(b)
}
