package testenv

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Serve is a `taskd serve` process a test started with StartServe.
type Serve struct {
	// Addr is the address it serves HTTP on (host:port).
	Addr string
	// Stderr is what it logged so far, JSON lines.
	Stderr *LockedBuffer
}

// StartServe builds the taskd binary from the package directory cmdDir
// (relative to the test's package, e.g. "../cmd/taskd") and runs `taskd serve`
// in a temporary directory, with the test process's environment but its
// TASKD_* and OTEL_* variables, then env, then a listener on a free loopback
// port and JSON logs. It returns once taskd logs "serving", and fails the
// test if taskd exits first or does not within a minute. When the test ends,
// taskd gets SIGTERM (SIGKILL after 30 s), and its log is shown if the test
// failed.
func StartServe(t testing.TB, cmdDir string, env ...string) *Serve {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "taskd")
	if out, err := exec.Command("go", "build", "-o", bin, cmdDir).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	var all []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKD_") && !strings.HasPrefix(kv, "OTEL_") {
			all = append(all, kv)
		}
	}
	all = append(all, env...)
	all = append(all, "TASKD_HTTP_ADDR=127.0.0.1:0", "TASKD_LOG_FORMAT=json")
	cmd := exec.Command(bin, "serve")
	cmd.Dir = dir
	cmd.Env = all
	stderr := &LockedBuffer{}
	cmd.Stdout, cmd.Stderr = io.Discard, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start taskd: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("taskd stderr:\n%s", stderr.String())
		}
	})

	var addr string
	Eventually(t, time.Minute, "taskd logs serving", func() bool {
		select {
		case <-done:
			t.Fatalf("taskd exited:\n%s", stderr.String())
		default:
		}
		for line := range strings.SplitSeq(stderr.String(), "\n") {
			var l struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "serving" {
				addr = l.Addr
				return true
			}
		}
		return false
	})
	return &Serve{Addr: addr, Stderr: stderr}
}

// LockedBuffer is a bytes.Buffer that a process writes to while a test reads
// it.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
