package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// httpStrategy runs the dispatcher end to end: a `taskd serve` child process,
// editors talking to it over its HTTP API.
type httpStrategy struct {
	cmd    *exec.Cmd
	base   string
	admin  string
	client *http.Client
	exited chan error
	logs   bytes.Buffer
}

// startServe starts `binary serve` on a free loopback port against the bench
// database and Redis, and waits until /readyz answers 200.
func startServe(ctx context.Context, binary string, env []string, lease time.Duration, editors int) (*httpStrategy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("find a free port: %w", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	dir, err := os.MkdirTemp("", "taskd-bench-")
	if err != nil {
		return nil, err
	}
	s := &httpStrategy{
		base:   "http://" + addr,
		admin:  "bench-admin-" + rand.Text(), // taskd serve takes 32 characters and up
		exited: make(chan error, 1),
		client: &http.Client{Transport: &http.Transport{
			MaxIdleConns:        editors * 2,
			MaxIdleConnsPerHost: editors * 2,
			IdleConnTimeout:     time.Minute,
		}, Timeout: time.Minute},
	}
	s.cmd = exec.Command(binary, "serve")
	s.cmd.Dir = dir // no ./config.yaml there: configuration comes from env alone
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKD_") {
			s.cmd.Env = append(s.cmd.Env, kv)
		}
	}
	s.cmd.Env = append(s.cmd.Env, env...)
	s.cmd.Env = append(s.cmd.Env,
		"TASKD_HTTP_ADDR="+addr,
		"TASKD_ADMIN_TOKEN="+s.admin,
		"TASKD_LEASE_TTL="+lease.String(),
		"TASKD_LOG_LEVEL=warn",
	)
	s.cmd.Stdout = io.Discard
	s.cmd.Stderr = &s.logs
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s serve: %w", binary, err)
	}
	go func() {
		s.exited <- s.cmd.Wait()
		_ = os.RemoveAll(dir)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := s.client.Get(s.base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.exited:
			return nil, fmt.Errorf("taskd serve exited before it was ready (%v): %s", err, s.logs.String())
		case <-ctx.Done():
			_ = s.close(ctx)
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = s.close(ctx)
			return nil, fmt.Errorf("taskd serve not ready after 20s: %s", s.logs.String())
		}
	}
}

// memory reads the child's VmHWM and VmRSS.
func (s *httpStrategy) memory() (Memory, error) {
	return readMemory(strconv.Itoa(s.cmd.Process.Pid))
}

// call sends a JSON request with token and decodes a 200 answer into out. It
// returns the status code.
func (s *httpStrategy) call(ctx context.Context, path, token string, in, out any) (int, error) {
	body, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("POST %s: %w", path, err)
	}
	switch resp.StatusCode {
	case http.StatusOK, http.StatusCreated:
		if out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				return resp.StatusCode, fmt.Errorf("POST %s: decode: %w", path, err)
			}
		}
		return resp.StatusCode, nil
	case http.StatusNoContent:
		return resp.StatusCode, nil
	}
	return resp.StatusCode, fmt.Errorf("POST %s: %s: %s", path, resp.Status, bytes.TrimSpace(data))
}

type assignmentJSON struct {
	Task struct {
		ID int64 `json:"id"`
	} `json:"task"`
	Fence int64 `json:"fence"`
}

func (s *httpStrategy) newEditor(ctx context.Context, name string, categories []string) (*editor, error) {
	var out struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	in := map[string]any{"name": name, "categories": categories}
	if _, err := s.call(ctx, "/v1/editors", s.admin, in, &out); err != nil {
		return nil, err
	}
	return &editor{id: out.ID, holder: "editor:" + strconv.FormatInt(out.ID, 10), categories: categories, token: out.Token}, nil
}

func (s *httpStrategy) claim(ctx context.Context, e *editor) (ref, error) {
	var a assignmentJSON
	code, err := s.call(ctx, "/v1/assignments/next", e.token, map[string]any{}, &a)
	if err != nil {
		return ref{}, err
	}
	if code == http.StatusNoContent {
		return ref{}, errNoTask
	}
	return ref{a.Task.ID, a.Fence}, nil
}

func (s *httpStrategy) submit(ctx context.Context, e *editor, r ref) (*ref, time.Duration, error) {
	var out struct {
		Next *assignmentJSON `json:"next"`
	}
	in := map[string]any{"fence": r.fence, "result": map[string]any{}}
	if _, err := s.call(ctx, "/v1/assignments/"+strconv.FormatInt(r.id, 10)+"/submit", e.token, in, &out); err != nil {
		return nil, 0, err
	}
	if out.Next == nil {
		return nil, 0, nil
	}
	// The server finds the next assignment in the same request; its share of
	// the time is not visible from here.
	return &ref{out.Next.Task.ID, out.Next.Fence}, -1, nil
}

func (s *httpStrategy) counts() (int64, int64) { return -1, -1 }

// close stops the child with SIGTERM (SIGKILL after 10s) and waits for it.
func (s *httpStrategy) close(context.Context) error {
	s.client.CloseIdleConnections()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.exited:
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			return err
		}
		if err != nil {
			return fmt.Errorf("taskd serve: %w: %s", err, s.logs.String())
		}
		return nil
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		return errors.New("taskd serve did not stop in 10s after SIGTERM; killed")
	}
}
