package chaos

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// galeraProvider is Debian's galera-4 library; TASKD_TEST_GALERA_PROVIDER
// overrides it.
const galeraProvider = "/usr/lib/galera/libgalera_smm.so"

// galeraCluster is a private 3-node MariaDB Galera cluster on loopback, as
// scripts/services.sh starts one: node 1 bootstraps a new cluster, nodes 2 and
// 3 join it from empty data directories and take a full copy by rsync (SST).
// A node killed and started again keeps its data directory and catches up
// from the others' gcache (IST).
type galeraCluster struct {
	bin, provider, dir string
	nodes              []*galeraNode
}

// galeraNode is one mariadbd of the cluster. Its ports are fixed, so that it
// comes back on the same addresses after a kill.
type galeraNode struct {
	c *galeraCluster
	// recoverFailed is the error of the last restart's --wsrep-recover, when
	// it failed and the node asked for a full copy instead.
	recoverFailed               error
	i                           int // 0-based
	dir, socket                 string
	port, gcomm, ist, sst       int
	proc                        *process
	started                     bool // it ran once: a restart joins, never bootstraps
	lastRejoin                  string
	lastRejoinAt, lastRejoinEnd time.Time
}

func newGalera(ctx context.Context, dir string) (*galeraCluster, error) {
	bin, err := findBinary("mariadbd", "mysqld")
	if err != nil {
		return nil, err
	}
	installDB, err := findBinary("mariadb-install-db", "mysql_install_db")
	if err != nil {
		return nil, err
	}
	provider := os.Getenv("TASKD_TEST_GALERA_PROVIDER")
	if provider == "" {
		provider = galeraProvider
	}
	if _, err := os.Stat(provider); err != nil {
		return nil, fmt.Errorf("%w: the Galera provider %s (Debian's galera-4): %v", ErrMissingServer, provider, err)
	}
	if _, err := findBinary("rsync"); err != nil {
		return nil, err
	}
	c := &galeraCluster{bin: bin, provider: provider, dir: filepath.Join(dir, "galera")}
	for i := range 3 {
		n := &galeraNode{c: c, i: i, dir: filepath.Join(c.dir, "node"+strconv.Itoa(i+1))}
		n.socket = filepath.Join(n.dir, "mysqld.sock")
		for _, p := range []*int{&n.port, &n.gcomm, &n.ist, &n.sst} {
			if *p, err = freePort(); err != nil {
				return nil, err
			}
		}
		for _, d := range []string{"data", "tmp"} {
			if err := os.MkdirAll(filepath.Join(n.dir, d), 0o755); err != nil {
				return nil, err
			}
		}
		c.nodes = append(c.nodes, n)
	}
	// Node 1's data directory is made here; the joiners' stay empty, for SST.
	// Its own tmpdir, as newMariaDB's.
	cmd := exec.CommandContext(ctx, installDB, "--no-defaults", "--user="+osUser(),
		"--datadir="+filepath.Join(c.nodes[0].dir, "data"), "--tmpdir="+filepath.Join(c.nodes[0].dir, "tmp"),
		"--auth-root-authentication-method=normal", "--skip-test-db", "--force")
	cmd.Env = cleanEnv()
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	if os.Geteuid() == 0 {
		// The joiner's rsync daemon, started by root, runs as nobody: nobody
		// must reach and write the empty data directories.
		for _, d := range []string{dir, c.dir} {
			if err := os.Chmod(d, 0o711); err != nil {
				return nil, err
			}
		}
		for _, n := range c.nodes[1:] {
			if err := os.Chmod(n.dir, 0o711); err != nil {
				return nil, err
			}
			if err := chownNobody(filepath.Join(n.dir, "data")); err != nil {
				return nil, err
			}
		}
	}
	return c, nil
}

func chownNobody(path string) error {
	uid, err := nobodyUID()
	if err != nil {
		return err
	}
	return os.Chown(path, uid, -1)
}

func chownTreeNobody(root string) error {
	uid, err := nobodyUID()
	if err != nil {
		return err
	}
	return filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, -1)
	})
}

func nobodyUID() (int, error) {
	out, err := exec.Command("id", "-u", "nobody").Output()
	if err != nil {
		return 0, fmt.Errorf("id -u nobody: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(out)))
}

// Start starts every node, one joiner at a time (node 1 is each SST's donor),
// and creates the database and the taskd user on node 1 before the others
// join, so that SST copies them.
func (c *galeraCluster) Start(ctx context.Context) error {
	for _, n := range c.nodes {
		if err := n.Start(ctx); err != nil {
			return err
		}
		if n.i == 0 {
			if err := n.setup(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// DSN is the go-sql-driver DSN of the taskd user over the nodes in order,
// tcp(a,b,c): taskd's failover connector reads the list.
func (c *galeraCluster) DSN(order ...int) string {
	addrs := make([]string, len(order))
	for i, o := range order {
		addrs[i] = loopback(c.nodes[o].port)
	}
	return fmt.Sprintf("%s:%s@tcp(%s)/%s?parseTime=true&loc=UTC&clientFoundRows=true",
		dbUser, dbPassword, strings.Join(addrs, ","), dbName)
}

// bindFailed reports whether a node's log says that a port it was given was
// taken when it bound it.
func (c *galeraCluster) bindFailed() bool {
	for _, n := range c.nodes {
		for _, f := range []string{"server.log", "stdout.log"} {
			b, _ := os.ReadFile(filepath.Join(n.dir, f))
			if bytes.Contains(b, []byte("Address already in use")) {
				return true
			}
		}
	}
	return false
}

func (c *galeraCluster) Close() {
	for _, n := range c.nodes {
		n.Close()
	}
}

func (n *galeraNode) Name() string { return "galera-" + strconv.Itoa(n.i+1) }

func (n *galeraNode) args() []string {
	var gcomm []string
	for _, o := range n.c.nodes {
		gcomm = append(gcomm, loopback(o.gcomm))
	}
	data := filepath.Join(n.dir, "data")
	args := []string{"--no-defaults", "--user=" + osUser(),
		"--datadir=" + data, "--tmpdir=" + filepath.Join(n.dir, "tmp"),
		"--socket=" + n.socket, "--pid-file=" + filepath.Join(n.dir, "mysqld.pid"),
		"--log-error=" + filepath.Join(n.dir, "server.log"),
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(n.port),
		"--skip-name-resolve",
		"--innodb-flush-log-at-trx-commit=2", "--innodb-doublewrite=0", "--innodb-autoinc-lock-mode=2",
		"--innodb-buffer-pool-size=128M", "--max-connections=500",
		"--character-set-server=utf8mb4", "--default-time-zone=+00:00",
		"--binlog-format=ROW",
		"--wsrep-on=ON", "--wsrep-provider=" + n.c.provider,
		"--wsrep-cluster-name=taskd-chaos",
		"--wsrep-cluster-address=gcomm://" + strings.Join(gcomm, ","),
		"--wsrep-node-name=" + n.Name(),
		"--wsrep-node-address=" + loopback(n.gcomm),
		"--wsrep-node-incoming-address=" + loopback(n.port),
		"--wsrep-sst-method=rsync",
		"--wsrep-sst-receive-address=" + loopback(n.sst),
		"--wsrep-provider-options=base_host=127.0.0.1;base_port=" + strconv.Itoa(n.gcomm) +
			";gmcast.listen_addr=tcp://" + loopback(n.gcomm) + ";ist.recv_addr=" + loopback(n.ist) +
			";gcache.size=" + galeraGcache + ";gcs.recv_q_hard_limit=1G;gcache.dir=" + data,
	}
	if n.i == 0 && !n.started {
		args = append(args, "--wsrep-new-cluster")
	}
	return args
}

// Start starts the node and waits until it is synced with the cluster: the
// first time, node 1 bootstraps and the others join by SST; after a kill, the
// node rejoins with its data directory, by IST when the donor's gcache still
// holds what it missed.
func (n *galeraNode) Start(ctx context.Context) error {
	if n.proc != nil && !n.proc.exited() {
		return nil
	}
	logPath := filepath.Join(n.dir, "server.log")
	before, _ := os.ReadFile(logPath)
	args := n.args()
	restart := n.started
	if restart {
		// After a kill -9 the saved state has no position (seqno -1), and a
		// node that knows none asks for a full copy (SST): read the position
		// from InnoDB first, as mysqld_safe's --wsrep-recover does, so that
		// the node asks for what it missed only (IST).
		// A recovery that fails or hangs (a node killed in the middle of a
		// full copy has files no server can open, and --wsrep-recover then
		// logs errors without end) leaves the node to ask for a full copy,
		// which replaces them.
		rctx, cancel := context.WithTimeout(ctx, recoverMax)
		pos, err := n.recoverPosition(rctx)
		cancel()
		switch {
		case err == nil:
			args = append(args, "--wsrep-start-position="+pos)
		case ctx.Err() != nil:
			return err
		default:
			n.recoverFailed = err
		}
		if os.Geteuid() == 0 {
			// Should the donor send a full copy anyway, its rsync daemon
			// runs as nobody and must overwrite the files.
			if err := chownTreeNobody(filepath.Join(n.dir, "data")); err != nil {
				return err
			}
		}
	}
	p, err := startProcess("mariadbd "+n.Name(), filepath.Join(n.dir, "stdout.log"), n.dir, nil, n.c.bin, args...)
	if err != nil {
		return err
	}
	n.proc = p
	n.started = true
	start := time.Now()
	// SST and a loaded machine: minutes, not seconds.
	if err := waitFor(ctx, 3*time.Minute, n.Name()+" synced", p, n.synced); err != nil {
		log, _ := os.ReadFile(logPath)
		return fmt.Errorf("%w\n%s", err, tail(log, 3000))
	}
	if restart {
		log, _ := os.ReadFile(logPath)
		n.lastRejoin = "SST"
		if len(log) > len(before) && strings.Contains(string(log[len(before):]), "IST received") {
			n.lastRejoin = "IST"
		}
		if n.recoverFailed != nil {
			n.lastRejoin += " (its recovery failed: " + firstLine(n.recoverFailed.Error()) + ")"
			n.recoverFailed = nil
		}
		n.lastRejoinAt, n.lastRejoinEnd = start, time.Now()
	}
	return nil
}

// galeraGcache is each node's gcache: the writesets a node killed for a
// while missed stay in its donor's, so that it rejoins by IST. The cluster
// commits thousands of writesets a second under the suite: with a gcache of
// 64 MB, a kill of a few seconds outran it, the node asked for a full copy
// (rsync SST), and the donor, paused for the copy while the others kept
// writing, grew past 20 GB resident and took the machine's memory.
const galeraGcache = "512M"

// recoverMax bounds a restart's --wsrep-recover, which takes seconds.
const recoverMax = 90 * time.Second

// recoverPosition runs mariadbd --wsrep-recover on the node's data directory
// and returns the position it recovered (uuid:seqno). The process is stopped
// once its log names the position: after a kill -9 mid-transaction, the
// recovery's background rollback can fail on the table it rolls back
// ("Incorrect information in file") without end, the process neither exiting
// nor bounding its memory (seen past 6 GB resident).
func (n *galeraNode) recoverPosition(ctx context.Context) (string, error) {
	logPath := filepath.Join(n.dir, "recover.log")
	_ = os.Remove(logPath)
	cmd := exec.CommandContext(ctx, n.c.bin, append(n.args(), "--wsrep-recover", "--log-error="+logPath)...)
	cmd.Env = cleanEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("%s --wsrep-recover: %w", n.Name(), err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	const marker = "WSREP: Recovered position: "
	position := func() (string, bool) {
		log, _ := os.ReadFile(logPath)
		i := strings.LastIndex(string(log), marker)
		if i < 0 {
			return "", false
		}
		pos, rest, ok := strings.Cut(string(log[i+len(marker):]), "\n")
		return strings.TrimSpace(pos), ok || rest != ""
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			if pos, ok := position(); ok && err == nil {
				return pos, nil
			}
			log, _ := os.ReadFile(logPath)
			if err == nil {
				return "", fmt.Errorf("%s --wsrep-recover: no recovered position in\n%s", n.Name(), tail(log, 2000))
			}
			return "", fmt.Errorf("%s --wsrep-recover: %v\n%s%s", n.Name(), err, out.String(), tail(log, 2000))
		case <-tick.C:
			if pos, ok := position(); ok {
				_ = cmd.Process.Kill()
				<-exited
				return pos, nil
			}
		}
	}
}

// root opens a connection to the node as root over its private socket.
func (n *galeraNode) root() (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", n.socket
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Second, 10*time.Second, 10*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	return db, nil
}

// synced reports nil once the node is in the primary component and synced.
func (n *galeraNode) synced(ctx context.Context) error {
	db, err := n.root()
	if err != nil {
		return err
	}
	defer db.Close()
	var status, state, ready string
	err = db.QueryRowContext(ctx, `SELECT
		(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_CLUSTER_STATUS'),
		(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE_COMMENT'),
		(SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_READY')`).Scan(&status, &state, &ready)
	if err != nil {
		return err
	}
	if status != "Primary" || state != "Synced" || ready != "ON" {
		return fmt.Errorf("%s: cluster status %s, state %s, ready %s", n.Name(), status, state, ready)
	}
	return nil
}

// primary reports whether the node is in the primary component.
func (n *galeraNode) primary(ctx context.Context) (bool, error) {
	db, err := n.root()
	if err != nil {
		return false, err
	}
	defer db.Close()
	var status string
	err = db.QueryRowContext(ctx, `SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
		WHERE VARIABLE_NAME = 'WSREP_CLUSTER_STATUS'`).Scan(&status)
	return status == "Primary", err
}

// isolate cuts the node off the others' group communication (on) or lets it
// back (off).
func (n *galeraNode) isolate(ctx context.Context, on bool) error {
	db, err := n.root()
	if err != nil {
		return err
	}
	defer db.Close()
	v := "0"
	if on {
		v = "1"
	}
	if _, err := db.ExecContext(ctx, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate="+v+"'"); err != nil {
		return fmt.Errorf("isolate %s (%s): %w", n.Name(), v, err)
	}
	return nil
}

// setup creates the database and the taskd user on node 1.
func (n *galeraNode) setup(ctx context.Context) error {
	db, err := n.root()
	if err != nil {
		return err
	}
	defer db.Close()
	return createDatabase(ctx, db)
}

func (n *galeraNode) Kill() error {
	if n.proc == nil {
		return nil
	}
	return n.proc.kill()
}

func (n *galeraNode) Pause() error  { return n.proc.stop() }
func (n *galeraNode) Resume() error { return n.proc.signal(syscall.SIGCONT) }
func (n *galeraNode) Close()        { _ = n.Kill() }

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
