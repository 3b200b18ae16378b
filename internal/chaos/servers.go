package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
)

// server is what faults do to a store: kill it, start it again, freeze it.
type server interface {
	Name() string
	Start(ctx context.Context) error
	Kill() error
	Pause() error
	Resume() error
	Close()
}

// redisServer is a private, non-persistent redis-server on a fixed loopback
// port: after Kill and Start it is back on the same port, empty.
type redisServer struct {
	bin, dir string
	port     int
	proc     *process
}

func newRedis(dir string) (*redisServer, error) {
	bin := os.Getenv("TASKD_TEST_REDIS_SERVER")
	if bin == "" {
		var err error
		if bin, err = findBinary("redis-server"); err != nil {
			return nil, err
		}
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, "redis")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &redisServer{bin: bin, dir: dir, port: port}, nil
}

func (s *redisServer) Name() string { return "redis" }
func (s *redisServer) Addr() string { return loopback(s.port) }

// Start starts the server, empty, and waits until it answers PING.
func (s *redisServer) Start(ctx context.Context) error {
	if s.proc != nil && !s.proc.exited() {
		return nil
	}
	p, err := startProcess("redis-server", filepath.Join(s.dir, "redis.log"), s.dir, nil, s.bin,
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--dir", s.dir,
		"--save", "", "--appendonly", "no", "--protected-mode", "no")
	if err != nil {
		return err
	}
	s.proc = p
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: time.Second})
	defer c.Close()
	return waitFor(ctx, 30*time.Second, "redis-server on "+s.Addr(), p, func(ctx context.Context) error {
		return c.Ping(ctx).Err()
	})
}

func (s *redisServer) Kill() error {
	if s.proc == nil {
		return nil
	}
	return s.proc.kill()
}

func (s *redisServer) Pause() error  { return s.proc.stop() }
func (s *redisServer) Resume() error { return s.proc.signal(syscall.SIGCONT) }
func (s *redisServer) Close()        { _ = s.Kill() }

// mariaDB is a private MariaDB server: a data directory made by
// mariadb-install-db and a mariadbd on a fixed loopback port. Kill and Start
// keep the data (crash recovery runs at start).
type mariaDB struct {
	bin, dir, socket string
	port             int
	proc             *process
}

// Database credentials of the private server.
const (
	dbName     = "taskd"
	dbUser     = "taskd"
	dbPassword = "taskd"
)

func newMariaDB(ctx context.Context, dir string) (*mariaDB, error) {
	bin, err := findBinary("mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	installDB, err := findBinary("mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, "mariadb")
	for _, d := range []string{"data", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	m := &mariaDB{bin: bin, dir: dir, socket: filepath.Join(dir, "mysqld.sock"), port: port}
	// As scripts/services.sh: no system config, root without a password
	// reachable only through the private socket, --force past the hostname
	// check that fails in bare containers.
	// Its own tmpdir too: a MariaDB that starts removes the temporary tables
	// it finds in its tmpdir, and so would another's in a shared /tmp.
	cmd := exec.CommandContext(ctx, installDB, "--no-defaults", "--user="+osUser(),
		"--datadir="+filepath.Join(dir, "data"), "--tmpdir="+filepath.Join(dir, "tmp"),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--force")
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	return m, nil
}

// osUser is the user mariadbd runs as: itself (root needs --user=root).
func osUser() string {
	if u := os.Getenv("USER"); u != "" && os.Geteuid() != 0 {
		return u
	}
	if os.Geteuid() == 0 {
		return "root"
	}
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		return "root"
	}
	return string(trimNewline(out))
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func (m *mariaDB) Name() string { return "mariadb" }

// DSN is the go-sql-driver DSN of the taskd user over TCP.
func (m *mariaDB) DSN() string {
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?parseTime=true&loc=UTC&clientFoundRows=true",
		dbUser, dbPassword, loopback(m.port), dbName)
}

// Start starts mariadbd on the data directory and waits until it answers;
// the first time, it also creates the database and the user.
func (m *mariaDB) Start(ctx context.Context) error {
	if m.proc != nil && !m.proc.exited() {
		return nil
	}
	p, err := startProcess("mariadbd", filepath.Join(m.dir, "stdout.log"), m.dir, nil, m.bin,
		"--no-defaults", "--user="+osUser(),
		"--datadir="+filepath.Join(m.dir, "data"), "--tmpdir="+filepath.Join(m.dir, "tmp"),
		"--socket="+m.socket, "--pid-file="+filepath.Join(m.dir, "mysqld.pid"),
		"--log-error="+filepath.Join(m.dir, "server.log"),
		"--bind-address=127.0.0.1", "--port="+strconv.Itoa(m.port),
		"--skip-name-resolve", "--skip-log-bin",
		// Fast: a commit is written to the OS at once (so it survives a
		// kill -9 of the server) and flushed to disk once a second.
		"--innodb-flush-log-at-trx-commit=2", "--innodb-doublewrite=0", "--innodb-autoinc-lock-mode=2",
		"--innodb-buffer-pool-size=128M", "--max-connections=500",
		"--character-set-server=utf8mb4", "--default-time-zone=+00:00")
	if err != nil {
		return err
	}
	m.proc = p
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", m.socket
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Second, 10*time.Second, 10*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	root := sql.OpenDB(conn)
	defer root.Close()
	if err := waitFor(ctx, 120*time.Second, "mariadbd on "+loopback(m.port), p, root.PingContext); err != nil {
		log, _ := os.ReadFile(filepath.Join(m.dir, "server.log"))
		return fmt.Errorf("%w\n%s", err, tail(log, 3000))
	}
	return createDatabase(ctx, root)
}

// createDatabase creates taskd's database and user through a root connection.
func createDatabase(ctx context.Context, root *sql.DB) error {
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS `" + dbName + "`",
		"CREATE USER IF NOT EXISTS '" + dbUser + "'@'127.0.0.1' IDENTIFIED BY '" + dbPassword + "'",
		"GRANT ALL PRIVILEGES ON *.* TO '" + dbUser + "'@'127.0.0.1'",
	} {
		if _, err := root.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("database setup: %w", err)
		}
	}
	return nil
}

func (m *mariaDB) Kill() error {
	if m.proc == nil {
		return nil
	}
	return m.proc.kill()
}

func (m *mariaDB) Pause() error  { return m.proc.stop() }
func (m *mariaDB) Resume() error { return m.proc.signal(syscall.SIGCONT) }
func (m *mariaDB) Close()        { _ = m.Kill() }

// waitFor polls check until it succeeds, p exits, limit passes or ctx ends.
func waitFor(ctx context.Context, limit time.Duration, what string, p *process, check func(context.Context) error) error {
	deadline := time.Now().Add(limit)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := check(cctx)
		cancel()
		if err == nil {
			return nil
		}
		if p != nil && p.exited() {
			return fmt.Errorf("%s exited during startup (%v): last error %w", what, p.exitErr(), err)
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer within %v: %w", what, limit, err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
