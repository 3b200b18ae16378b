package chaos

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// buildTaskd builds ./cmd/taskd of the module that holds the working
// directory into dir and returns the binary's path.
func buildTaskd(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("not inside the taskd module; pass the taskd binary")
	}
	bin := filepath.Join(dir, "taskd")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/taskd")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/taskd: %v\n%s", err, out)
	}
	return bin, nil
}

// replica is one `taskd serve` process on a fixed loopback port, so that it
// comes back on the same address after a kill.
type replica struct {
	name string
	bin  string
	dir  string
	port int
	env  []string
	proc *process
}

func newReplica(name, bin, workDir string, env []string) (*replica, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(workDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &replica{name: name, bin: bin, dir: dir, port: port,
		env: append(append([]string(nil), env...), "TASKD_HTTP_ADDR="+loopback(port))}, nil
}

func (r *replica) Name() string { return r.name }
func (r *replica) Base() string { return "http://" + loopback(r.port) }

// Start runs `taskd serve` and waits until GET /healthz answers 200.
func (r *replica) Start(ctx context.Context) error {
	if r.proc != nil && !r.proc.exited() {
		return nil
	}
	p, err := startProcess("taskd "+r.name, filepath.Join(r.dir, "taskd.log"), r.dir, r.env, r.bin, "serve")
	if err != nil {
		return err
	}
	r.proc = p
	client := &http.Client{Timeout: 2 * time.Second}
	err = waitFor(ctx, 60*time.Second, "taskd "+r.name, p, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, "GET", r.Base()+"/healthz", nil)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET /healthz: %d", resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(r.dir, "taskd.log"))
		return fmt.Errorf("%w\n%s", err, tail(log, 3000))
	}
	return nil
}

// Kill is kill -9.
func (r *replica) Kill() error {
	if r.proc == nil {
		return nil
	}
	return r.proc.kill()
}

func (r *replica) Pause() error  { return r.proc.stop() }
func (r *replica) Resume() error { return r.proc.signal(syscall.SIGCONT) }
func (r *replica) Close()        { _ = r.Kill() }

// runMigrate runs `taskd migrate` against the DSN.
func runMigrate(ctx context.Context, bin, dir string, env []string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "migrate")
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("taskd migrate: %v\n%s", err, out)
	}
	return nil
}
