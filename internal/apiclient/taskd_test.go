package apiclient_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

// adminToken is the admin token of the taskd the tests start.
const adminToken = "apiclient-admin-token-0123456789abcdef"

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		_ = os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// taskdBin builds cmd/taskd of the repository this module sits in, once per
// test run (with -race when the tests have it), and returns its path.
func taskdBin(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "apiclient-taskd-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "taskd")
		args := []string{"build", "-o", binPath}
		if raceBuild {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, "./cmd/taskd")...)
		cmd.Dir = filepath.Join("..", "..") // the taskd module, with its own go.mod
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build ./cmd/taskd: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startTaskd runs `taskd serve` against the test services (a database of its
// own, a Redis key prefix of its own) on a free port, and returns its base
// URL once it serves. It is stopped when the test ends.
func startTaskd(t *testing.T) string {
	t.Helper()
	return startTaskdConfig(t, "")
}

// startTaskdConfig is startTaskd with config.yaml holding yaml, when not empty.
func startTaskdConfig(t *testing.T, yaml string) string {
	t.Helper()
	opt, err := redis.ParseURL(testenv.Lookup(t, testenv.RedisURLVar))
	if err != nil {
		t.Fatalf("parse %s: %v", testenv.RedisURLVar, err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKD_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"TASKD_MYSQL_DSN="+storetest.NewDatabase(t),
		"TASKD_REDIS_ADDRS="+opt.Addr,
		"TASKD_REDIS_KEY_PREFIX=apiclient:"+strings.ToLower(rand.Text()[:10])+":",
		"TASKD_ADMIN_TOKEN="+adminToken,
		"TASKD_HTTP_ADDR=127.0.0.1:0", // the log says which port
		"TASKD_LOG_FORMAT=json",
	)

	cmd := exec.Command(taskdBin(t), "serve")
	cmd.Dir = t.TempDir() // no config.yaml, but yaml's
	if yaml != "" {
		if err := os.WriteFile(filepath.Join(cmd.Dir, "config.yaml"), []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start taskd serve: %v", err)
	}
	// The log is read line by line: the "serving" line names the address.
	var (
		mu   sync.Mutex
		logs bytes.Buffer
	)
	addr := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			mu.Lock()
			logs.Write(sc.Bytes())
			logs.WriteByte('\n')
			mu.Unlock()
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				select {
				case addr <- line.Addr:
				default:
				}
			}
		}
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("taskd serve's log:\n%s", logs.String())
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	select {
	case a := <-addr:
		return "http://" + a
	case <-done:
		t.Fatal("taskd serve exited before serving")
	case <-ctx.Done():
		t.Fatal("taskd serve did not log serving within a minute")
	}
	return ""
}
