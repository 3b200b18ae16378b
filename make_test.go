package taskd_test

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
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
// and without the test's TASKD_* variables but env. When the test ends, make's
// process group gets SIGKILL if make is still there, and scripts/services.sh
// takes down the servers at each of servicesBases.
func startMake(t *testing.T, env []string, servicesBases []int, args ...string) *makeProcess {
	t.Helper()
	var all []string
	for _, kv := range os.Environ() {
		if len(kv) < 6 || kv[:6] != "TASKD_" {
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
// dev, Redis and MariaDB must all be gone within 30 s.
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
