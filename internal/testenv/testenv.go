// Package testenv finds the real services that integration tests run
// against, and starts private Redis servers for tests that stop, restart or
// flush one.
//
// `make test` (scripts/services.sh) starts the shared services and exports
// their addresses. When a variable is missing, tests skip with a message
// naming it, unless TASKD_TEST_REQUIRE_SERVICES=1, in which case they fail:
// CI must never pass by skipping.
package testenv

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Names of the environment variables the tests read.
const (
	RequireServicesVar = "TASKD_TEST_REQUIRE_SERVICES"
	RedisURLVar        = "TASKD_TEST_REDIS_URL"
	RedlockAddrsVar    = "TASKD_TEST_REDLOCK_ADDRS"
	ClusterAddrsVar    = "TASKD_TEST_REDIS_CLUSTER_ADDRS"
	MySQLDSNVar        = "TASKD_TEST_MYSQL_DSN"
	// MySQLReplicaDSNVar names a replica of MySQLDSNVar's server that applies
	// the databases named taskd_r_* (see scripts/services.sh).
	MySQLReplicaDSNVar = "TASKD_TEST_MYSQL_REPLICA_DSN"
	RedisServerVar     = "TASKD_TEST_REDIS_SERVER"
	// GaleraDSNVar names the first node of a Galera cluster (with a database
	// the tests' user may create others beside), and GaleraAddrsVar lists
	// every node's address, host:port, comma-separated, the first node first.
	GaleraDSNVar   = "TASKD_TEST_GALERA_DSN"
	GaleraAddrsVar = "TASKD_TEST_GALERA_ADDRS"
)

// Lookup returns the value of the environment variable name, or skips the
// test (fails it under TASKD_TEST_REQUIRE_SERVICES=1) when it is unset.
func Lookup(t testing.TB, name string) string {
	t.Helper()
	v := os.Getenv(name)
	if v != "" {
		return v
	}
	if os.Getenv(RequireServicesVar) == "1" {
		t.Fatalf("%s is not set but %s=1: start the services with `make test` or `scripts/services.sh up`", name, RequireServicesVar)
	}
	t.Skipf("%s is not set: run `make test` to start Redis and MariaDB", name)
	return ""
}

// List returns the comma-separated list in the environment variable name,
// with the same skip rules as Lookup.
func List(t testing.TB, name string) []string {
	t.Helper()
	var out []string
	for _, s := range strings.Split(Lookup(t, name), ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Redis returns a client of the shared Redis server, closed when the test
// ends.
func Redis(t testing.TB) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(Lookup(t, RedisURLVar))
	if err != nil {
		t.Fatalf("parse %s: %v", RedisURLVar, err)
	}
	return newClient(t, opt)
}

// RedlockMasters returns clients of the first n shared Redlock masters.
func RedlockMasters(t testing.TB, n int) []*redis.Client {
	t.Helper()
	addrs := List(t, RedlockAddrsVar)
	if len(addrs) < n {
		t.Fatalf("%s lists %d masters, the test needs %d", RedlockAddrsVar, len(addrs), n)
	}
	clients := make([]*redis.Client, n)
	for i := range clients {
		clients[i] = newClient(t, &redis.Options{Addr: addrs[i]})
	}
	return clients
}

// Cluster returns a client of the shared 3-master Redis Cluster.
func Cluster(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 List(t, ClusterAddrsVar),
		ContextTimeoutEnabled: true,
	})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	}); err != nil {
		t.Fatalf("redis cluster: %v", err)
	}
	return c
}

func newClient(t testing.TB, opt *redis.Options) *redis.Client {
	t.Helper()
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("redis %s: %v", opt.Addr, err)
	}
	return c
}

// QuietRedis silences go-redis's own log lines (dial failures and the like),
// which fault tests provoke on purpose. Call it from TestMain.
func QuietRedis() { redis.SetLogger(discard{}) }

type discard struct{}

func (discard) Printf(context.Context, string, ...any) {}

// Prefix returns a key prefix unique to this test run, so that parallel
// tests sharing a server never touch each other's keys.
func Prefix(t testing.TB) string {
	name := strings.NewReplacer("/", ":", " ", "_").Replace(t.Name())
	return fmt.Sprintf("test:%s:%s:", name, rand.Text()[:8])
}

// RedisServer is a private redis-server process owned by one test.
type RedisServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	cmd  *exec.Cmd
}

// StartRedis starts a private, non-persistent redis-server on a free
// loopback port. It is stopped when the test ends.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin := os.Getenv(RedisServerVar)
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			Lookup(t, RedisServerVar) // skips or fails with the usual message
		}
	}
	s := &RedisServer{t: t, bin: bin, dir: t.TempDir(), port: freePort(t)}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Addr returns the server's host:port; it stays the same across restarts.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Client returns a new client of the server, closed when the test ends.
func (s *RedisServer) Client() *redis.Client {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr: s.Addr(), ContextTimeoutEnabled: true,
		MaxRetries: -1, DialTimeout: 200 * time.Millisecond, DialerRetries: 1,
	})
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// Start starts the server (again, after Stop) and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	cmd := exec.Command(s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--dir", s.dir, "--save", "", "--appendonly", "no",
		"--logfile", filepath.Join(s.dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	s.cmd = cmd
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server on %s did not answer: %v\n%s", s.Addr(), err, log)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Stop kills the server, losing everything it held, and waits for it to exit.
func (s *RedisServer) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause freezes the server (SIGSTOP): it keeps its connections but answers
// nothing until Resume. The test's cleanup resumes it.
func (s *RedisServer) Pause() {
	s.t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		s.t.Fatalf("pause redis-server: %v", err)
	}
	s.t.Cleanup(s.Resume)
}

// Resume lets a paused server answer again.
func (s *RedisServer) Resume() {
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
