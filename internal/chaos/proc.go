package chaos

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrMissingServer is returned by Run when redis-server, mariadbd or
// mariadb-install-db cannot be found.
var ErrMissingServer = errors.New("server binary not found")

// searchDirs are looked in after PATH: Debian puts mariadbd in /usr/sbin,
// which a non-root PATH may lack.
var searchDirs = []string{"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin"}

// findBinary returns the path of the first of names found on PATH or in
// searchDirs.
func findBinary(names ...string) (string, error) {
	for _, name := range names {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, dir := range searchDirs {
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%w: none of %v on PATH or in %v", ErrMissingServer, names, searchDirs)
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// process is a child process in a process group of its own, with its output
// appended to a log file. Signals go to the whole group.
type process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when it exited
	mu   sync.Mutex
	err  error // Wait's result, once done
}

// startProcess starts bin with args in dir, env added to the harness's
// environment without TASKD_ variables, output appended to logPath.
func startProcess(name, logPath, dir string, env []string, bin string, args ...string) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own group, so that a kill reaches anything it starts; and killed
	// with the harness if the harness dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// cleanEnv is the harness's environment without TASKD_ variables, so nothing
// from the caller's shell reaches taskd.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if len(kv) < 6 || kv[:6] != "TASKD_" {
			env = append(env, kv)
		}
	}
	return env
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// exitErr returns Wait's result once the process exited.
func (p *process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// signal sends sig to the process group.
func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return fmt.Errorf("%s has exited", p.name)
	}
	if err := syscall.Kill(-p.pid(), sig); err != nil {
		return fmt.Errorf("signal %s: %w", p.name, err)
	}
	return nil
}

// stop freezes the process group (SIGSTOP) and waits until every thread of
// the process is stopped: kill(2) returns before the stop takes effect.
func (p *process) stop() error {
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for !allStopped(p.pid()) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s (pid %d) not stopped 10s after SIGSTOP", p.name, p.pid())
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// allStopped reports whether every thread of pid is in state T (stopped).
func allStopped(pid int) bool {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tids, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, t := range tids {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "stat"))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || (b[i+2] != 'T' && b[i+2] != 't') {
			return false
		}
	}
	return true
}

// kill sends SIGKILL to the group (after SIGCONT, in case it was stopped) and
// waits for the exit.
func (p *process) kill() error {
	if p.exited() {
		return nil
	}
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	_ = syscall.Kill(-p.pid(), syscall.SIGCONT)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit within 30s of SIGKILL", p.name, p.pid())
	}
}
