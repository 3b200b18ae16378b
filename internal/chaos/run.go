package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Config configures a run. Zero fields take the defaults in WithDefaults.
type Config struct {
	// TaskdBin is the taskd binary to run; empty builds ./cmd/taskd of the
	// module around the working directory with `go build`.
	TaskdBin string
	// WorkDir holds the servers' data and every log; empty makes a temporary
	// directory, removed at the end unless the run found a violation.
	WorkDir string
	// Editors is the number of simulated editors (default 30).
	Editors int
	// Categories is the number of task categories (default 5).
	Categories int
	// Lease is taskd's dispatch.lease_ttl (default 2s); SweepInterval its
	// sweep.interval (default 1s).
	Lease, SweepInterval time.Duration
	// Slack is added to lease_ttl + sweep.interval for the liveness check,
	// for the sweep's own work on a loaded machine (default 2s).
	Slack time.Duration
	// RequestBound is how long past its wait any request may take to be
	// answered, 503 included (default 6s).
	RequestBound time.Duration
	// HangFor is how long a hung store stays frozen; longer than
	// RequestBound, so that a taskd that waits for it fails the bound
	// (default RequestBound + 2s).
	HangFor time.Duration
	// FaultEvery is the calm time after a fault's recovery before the next
	// fault (default 3s).
	FaultEvery time.Duration
	// Soak runs faults in a loop until Assignments assignments were made or
	// Duration passed; otherwise each fault runs once.
	Soak        bool
	Assignments int64         // soak target (default 100,000)
	Duration    time.Duration // soak bound (default 30m)
	// Pool is the number of pending tasks the feeder keeps (default 1000).
	Pool int
	// Galera runs the store as a private 3-node MariaDB Galera cluster
	// instead of one MariaDB server: each taskd replica lists the nodes in
	// another order, and the faults are the cluster's (a node killed and
	// rejoining by IST, a node frozen, a node cut off from the others). It
	// needs Debian's galera-4 and rsync.
	Galera bool
	// Workflow runs a staged, overlapped workload instead of the default one
	// (see workflowCategories): tasks of a category with the stages edit and
	// review, where reviewers send a quarter back with notes; of a category
	// that asks for three independent labels per task; and of a plain one;
	// under dispatch.fair_share, with editors that hold two or three claims
	// at once and editors limited to the review stage. The categories are
	// the taskd config's (a config.yaml the harness writes); the editors'
	// capacities and stages are given as POST /v1/editors creates them.
	// Categories is then ignored.
	Workflow bool
	// Replicas is the number of taskd replicas the editors' requests go to
	// in turn (default 3, at least 2): the faults name the first two, the
	// others serve on beside them (each is killed with the rest).
	Replicas int
	// InFlightLimit is the max_in_flight of the limited category (cat0) in
	// the default workload and on Galera (default 3; negative: none). It is
	// below the number of editors that take that category, so it binds; the
	// audit trail must never show more claims of it live at once. Ignored by
	// the workflow pass.
	InFlightLimit int
	// Logf receives progress lines; default none.
	Logf func(format string, args ...any)
}

// WithDefaults returns c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Editors == 0 {
		c.Editors = 30
	}
	if c.Categories == 0 {
		c.Categories = 5
	}
	def(&c.Lease, 2*time.Second)
	def(&c.SweepInterval, time.Second)
	def(&c.Slack, 2*time.Second)
	def(&c.RequestBound, 6*time.Second)
	def(&c.HangFor, c.RequestBound+2*time.Second)
	def(&c.FaultEvery, 3*time.Second)
	def(&c.Duration, 30*time.Minute)
	if c.Assignments == 0 {
		c.Assignments = 100_000
	}
	if c.Pool == 0 {
		c.Pool = 1000
	}
	if c.Replicas < 2 {
		c.Replicas = 3
	}
	if c.InFlightLimit == 0 {
		c.InFlightLimit = 3
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return c
}

const adminToken = "chaos-admin-token-0123456789abcdefghij"

// harness is one run: the servers, the replicas, the editors and the records.
type harness struct {
	cfg      Config
	workDir  string
	bin      string
	rec      *recorder
	router   *router
	redis    *redisServer
	db       *mariaDB
	galera   *galeraCluster
	replicas []*replica
	sql      *sql.DB
	env      []string
	admin    *http.Client
	mix      editorMix
	cats     []string                 // the categories tasks are made in
	holds    map[string]time.Duration // send_back_hold by category, for the checks
	// decisions says whether the API takes a submit's decision and notes
	// (probed at setup); without, reviewers approve and labels go in the
	// result alone.
	decisions bool
	stats     workflowStats
	beside    int64     // claims taken beside another, from the audit trail
	groups    int64     // groups with every result in
	agreeing  int64     // of which all decisions are equal
	editors   []*editor // the simulated editors
	extra     []*editor // probes and others outside the editors' loop

	assignments, submits atomic.Int64
	clockOffset          time.Duration // database clock minus the harness's
	windowsMu            sync.Mutex
	windows              []window // faults, for the liveness check
	hostile              hostileResult
	checks               []CheckResult
	drainedMaxID         int64 // the last task before the hostile burst
	purge                purgeState
	purgeCounts          PurgeCounts
	serial               atomic.Int64
	inFlight             *InFlightCounts // the limited category, nil without one
	hedged               HedgeCounts     // what the hedges did (see hedges.go)
}

// window is a fault's time span, from its start until the harness saw the
// system answer again.
type window struct {
	name       string
	start, end time.Time
}

// Run starts the servers and taskd, runs the editors through the faults,
// drains the pool and checks the invariants. The error is about the harness
// itself (a server that would not start); broken promises are in
// Report.Violations. Every process started is killed before Run returns.
func Run(ctx context.Context, cfg Config) (rep *Report, err error) {
	cfg = cfg.WithDefaults()
	h := &harness{cfg: cfg, rec: &recorder{logf: cfg.Logf}, router: &router{}, admin: newHTTPClient(), mix: defaultMix}
	if cfg.Workflow {
		for _, c := range workflowCategories {
			h.cats = append(h.cats, c.name)
		}
	} else {
		for i := range cfg.Categories {
			h.cats = append(h.cats, category(i))
		}
	}
	started := time.Now()
	removeDir := false
	if h.workDir = cfg.WorkDir; h.workDir == "" {
		if h.workDir, err = os.MkdirTemp("", "taskd-chaos-"); err != nil {
			return nil, err
		}
		removeDir = true
	}
	defer func() {
		h.teardown()
		if removeDir && err == nil && rep != nil && len(rep.Violations) == 0 {
			_ = os.RemoveAll(h.workDir)
		} else if removeDir {
			cfg.Logf("logs and data kept in %s", h.workDir)
		}
	}()
	if err := h.setup(ctx); err != nil {
		return nil, err
	}
	if err := h.run(ctx); err != nil {
		return nil, err
	}
	rep = h.report(time.Since(started))
	if len(rep.Violations) > 0 {
		cfg.Logf("taskd logs:\n%s", h.logTails())
	}
	return rep, nil
}

func (h *harness) teardown() {
	for _, r := range h.replicas {
		r.Close()
	}
	if h.sql != nil {
		_ = h.sql.Close()
	}
	if h.redis != nil {
		h.redis.Close()
	}
	if h.db != nil {
		h.db.Close()
	}
	if h.galera != nil {
		h.galera.Close()
	}
}

func (h *harness) logf(format string, args ...any) { h.cfg.Logf(format, args...) }

// setup starts Redis, MariaDB and the taskd replicas, and creates the
// editors and the first tasks.
func (h *harness) setup(ctx context.Context) error {
	var err error
	if h.redis, err = newRedis(h.workDir); err != nil {
		return err
	}
	// Build taskd while mariadb-install-db runs.
	var wg sync.WaitGroup
	var buildErr error
	h.bin = h.cfg.TaskdBin
	if h.bin == "" {
		wg.Go(func() { h.bin, buildErr = buildTaskd(ctx, h.workDir) })
	} else if h.bin, err = filepath.Abs(h.bin); err != nil {
		// The processes run in directories of their own.
		return fmt.Errorf("taskd binary: %w", err)
	}
	var dbErr error
	if h.cfg.Galera {
		h.logf("starting private redis-server and a 3-node Galera cluster in %s", h.workDir)
		h.galera, dbErr = newGalera(ctx, h.workDir)
	} else {
		h.logf("starting private redis-server and mariadbd in %s", h.workDir)
		h.db, dbErr = newMariaDB(ctx, h.workDir)
	}
	wg.Wait()
	if dbErr != nil {
		return dbErr
	}
	if buildErr != nil {
		return buildErr
	}
	if err := h.redis.Start(ctx); err != nil {
		return err
	}
	var dsn string
	if h.galera != nil {
		start := time.Now()
		// Its twelve ports are picked free, then bound seconds later: on a
		// busy machine another process may take one meanwhile. Such a start
		// is tried again, on fresh ports, in a directory of its own.
		for attempt := 1; ; attempt++ {
			err := h.galera.Start(ctx)
			if err == nil {
				break
			}
			if attempt == 3 || !h.galera.bindFailed() {
				return err
			}
			h.logf("galera: a port was taken before a node bound it; starting again on fresh ports")
			h.galera.Close()
			if h.galera, err = newGalera(ctx, filepath.Join(h.workDir, "galera-try"+strconv.Itoa(attempt+1))); err != nil {
				return err
			}
		}
		h.logf("galera: 3 nodes synced in %v", time.Since(start).Round(time.Millisecond))
		dsn = h.galera.DSN(0, 1, 2)
	} else {
		if err := h.db.Start(ctx); err != nil {
			return err
		}
		dsn = h.db.DSN()
	}
	if err := h.openSQL(); err != nil {
		return err
	}
	h.env = []string{
		"TASKD_MYSQL_DSN=" + dsn,
		"TASKD_REDIS_ADDRS=" + h.redis.Addr(),
		"TASKD_REDIS_KEY_PREFIX=chaos:",
		"TASKD_ADMIN_TOKEN=" + adminToken,
		"TASKD_DISPATCH_LEASE_TTL=" + h.cfg.Lease.String(),
		"TASKD_SWEEP_INTERVAL=" + h.cfg.SweepInterval.String(),
		"TASKD_DISPATCH_SKIP_FOR=2s",
		"TASKD_DISPATCH_POLL_INTERVAL=1s",
		"TASKD_HTTP_MAX_WAIT=10s",
		// Well inside RequestBound: a request waiting for a hung store is
		// answered 503 by then.
		"TASKD_HTTP_REQUEST_TIMEOUT=" + (h.cfg.RequestBound / 2).String(),
		"TASKD_HTTP_SHUTDOWN_TIMEOUT=5s",
		"TASKD_LOG_FORMAT=json",
		"TASKD_LOG_LEVEL=info",
	}
	h.env = append(h.env, retentionEnv()...)
	if h.cfg.Workflow {
		path, err := writeWorkflowConfig(h.workDir)
		if err != nil {
			return err
		}
		h.env = append(h.env, "TASKD_CONFIG="+path)
		h.holds = make(map[string]time.Duration)
		for _, c := range workflowCategories {
			h.holds[c.name] = sendBackHold
		}
	}
	if err := h.migrateWithLimit(ctx); err != nil {
		return err
	}
	if err := h.archivePurged(ctx); err != nil {
		return err
	}
	for i := range h.cfg.Replicas {
		name := "replica-" + string(rune('a'+i))
		env := h.env
		if h.galera != nil {
			// Each replica starts on another node and fails over in its
			// own order: a on 1, 2, 3; b on 2, 3, 1; c on 3, 1, 2.
			env = append(append([]string(nil), h.env...), "TASKD_MYSQL_DSN="+h.galera.DSN(i%3, (i+1)%3, (i+2)%3))
		}
		r, err := newReplica(name, h.bin, h.workDir, env)
		if err != nil {
			return err
		}
		h.replicas = append(h.replicas, r)
		h.router.add(r.Base())
	}
	if err := h.startReplicas(ctx, h.replicas...); err != nil {
		return err
	}
	if err := h.measureClock(ctx); err != nil {
		return err
	}

	if h.cfg.Workflow {
		if err := h.workflowEditors(ctx); err != nil {
			return err
		}
	} else {
		for i := range h.cfg.Editors {
			cats := []string{category(i % h.cfg.Categories)}
			if extra := category(rand.IntN(h.cfg.Categories)); extra != cats[0] {
				cats = append(cats, extra)
			}
			e, err := h.createEditor(ctx, fmt.Sprintf("editor-%03d", i), cats...)
			if err != nil {
				return err
			}
			h.editors = append(h.editors, e)
		}
	}
	if err := h.addTasks(ctx, h.cfg.Pool); err != nil {
		return err
	}
	if h.cfg.Workflow {
		if err := h.addGold(ctx); err != nil {
			return err
		}
	}
	dbAddr := "mariadb " + dsnAddr(dsn)
	if h.galera != nil {
		dbAddr = "galera " + dsnAddr(dsn)
	}
	bases := make([]string, len(h.replicas))
	for i, r := range h.replicas {
		bases[i] = r.Base()
	}
	h.logf("up: redis %s, %s, taskd %s, %d editors, %d tasks",
		h.redis.Addr(), dbAddr, strings.Join(bases, " "), len(h.editors), h.cfg.Pool)
	return nil
}

// dsnAddr is the tcp(...) part of a DSN.
func dsnAddr(dsn string) string {
	_, rest, _ := strings.Cut(dsn, "@tcp(")
	addrs, _, _ := strings.Cut(rest, ")")
	return addrs
}

func category(i int) string { return "cat" + strconv.Itoa(i) }

// pickCategory returns the category of a new task: one of the run's at
// random, by weight in the workflow pass.
func (h *harness) pickCategory() string {
	if !h.cfg.Workflow {
		return h.cats[rand.IntN(len(h.cats))]
	}
	return pickWorkflowCategory()
}

// openSQL opens the harness's own connection for checks, with timeouts so
// that a frozen server never hangs the harness.
func (h *harness) openSQL() error {
	var dsn string
	if h.galera != nil {
		// Node 3, which no fault touches; its reads wait for the cluster's
		// latest commits.
		dsn = h.galera.DSN(2) + "&wsrep_sync_wait=1"
	} else {
		dsn = h.db.DSN()
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 2*time.Second, 30*time.Second, 30*time.Second
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	h.sql = sql.OpenDB(conn)
	h.sql.SetMaxOpenConns(4)
	return nil
}

// measureClock reads the database clock against the harness's (both are this
// host's, but the checks say so rather than assume it).
func (h *harness) measureClock(ctx context.Context) error {
	before := time.Now()
	var now time.Time
	if err := h.sql.QueryRowContext(ctx, "SELECT NOW(3)").Scan(&now); err != nil {
		return fmt.Errorf("read the database clock: %w", err)
	}
	after := time.Now()
	h.clockOffset = now.Sub(before.Add(after.Sub(before) / 2))
	if h.clockOffset.Abs() > time.Second {
		h.logf("the database clock is %v off the harness's", h.clockOffset)
	}
	return nil
}

func (h *harness) startReplicas(ctx context.Context, rs ...*replica) error {
	errs := make([]error, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { errs[i] = r.Start(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// adminCall sends an admin request to a replica in rotation, retrying while
// the answer is 503 or missing, for up to a minute.
func (h *harness) adminCall(ctx context.Context, method, path string, body any, want int, out any) error {
	deadline := time.Now().Add(time.Minute)
	for {
		base := h.router.pick()
		resp := call(ctx, h.admin, base, method, path, adminToken, body, h.cfg.RequestBound)
		h.router.done(base)
		if resp.status == want {
			if out != nil {
				return jsonUnmarshal(resp.body, out)
			}
			return nil
		}
		if resp.status != 0 && resp.status != http.StatusServiceUnavailable {
			return fmt.Errorf("%s %s on %s: %d %s", method, path, base, resp.status, trimBody(resp.body))
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s %s: no answer %d within a minute: %v %d", method, path, want, resp.err, resp.status)
		}
		backoff(ctx)
	}
}

func (h *harness) createEditor(ctx context.Context, name string, cats ...string) (*editor, error) {
	return h.createEditorWith(ctx, name, cats, 1, nil)
}

// createEditorWith creates an editor of capacity claims at once, limited to
// stages of some of its categories (nil: none).
func (h *harness) createEditorWith(ctx context.Context, name string, cats []string, capacity int, stages map[string][]string) (*editor, error) {
	body := map[string]any{"name": name, "categories": cats}
	if capacity > 1 {
		body["capacity"] = capacity
	}
	if stages != nil {
		body["stages"] = stages
	}
	var out struct {
		ID    int64  `json:"id"`
		Token string `json:"token"`
	}
	if err := h.adminCall(ctx, "POST", "/v1/editors", body, http.StatusCreated, &out); err != nil {
		return nil, err
	}
	return &editor{id: out.ID, name: name, token: out.Token, categories: cats, capacity: max(1, capacity), client: newHTTPClient(),
		seen: make(map[claimRef]bool), walkedAway: make(map[claimRef]bool)}, nil
}

// addTasks inserts n tasks spread over the categories, 1000 per request.
func (h *harness) addTasks(ctx context.Context, n int) error {
	for n > 0 {
		k := min(n, 1000)
		if err := h.addTasksIn(ctx, k, ""); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// addTasksIn inserts n tasks in cat, or spread over the categories when cat
// is empty.
func (h *harness) addTasksIn(ctx context.Context, n int, cat string) error {
	ts := make([]map[string]any, n)
	for i := range ts {
		c := cat
		if c == "" {
			c = h.pickCategory()
		}
		s := h.serial.Add(1)
		ts[i] = map[string]any{"category": c, "priority": rand.IntN(5), "title": "chaos task " + strconv.FormatInt(s, 10),
			"payload": map[string]any{"n": s}}
		if due := h.dueAt(c); due != "" {
			ts[i]["due_at"] = due
		}
	}
	return h.adminCall(ctx, "POST", "/v1/tasks", ts, http.StatusCreated, nil)
}

// feed keeps about cfg.Pool tasks pending until ctx ends. Its requests are
// observed like the editors'.
func (h *harness) feed(ctx context.Context) {
	for ctx.Err() == nil {
		sleepCtx(ctx, 200*time.Millisecond)
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var pending int
		err := h.sql.QueryRowContext(qctx, "SELECT COUNT(*) FROM tasks WHERE status = 'pending'").Scan(&pending)
		cancel()
		if err != nil || pending >= h.cfg.Pool {
			continue
		}
		n := min(h.cfg.Pool-pending, 1000)
		ts := make([]map[string]any, n)
		for i := range ts {
			s, c := h.serial.Add(1), h.pickCategory()
			ts[i] = map[string]any{"category": c, "priority": rand.IntN(5),
				"title": "chaos task " + strconv.FormatInt(s, 10), "payload": map[string]any{"n": s}}
			if due := h.dueAt(c); due != "" {
				ts[i]["due_at"] = due
			}
		}
		base := h.router.pick()
		resp := call(ctx, h.admin, base, "POST", "/v1/tasks", adminToken, ts, h.cfg.RequestBound)
		h.router.done(base)
		if ctx.Err() != nil {
			return
		}
		p := h.rec.observe("add tasks "+base, resp)
		if resp.status != 0 && resp.status != http.StatusCreated && resp.status != http.StatusServiceUnavailable && resp.status < 500 {
			h.rec.violate(p, "expected answers", "add tasks: %d %s", resp.status, trimBody(resp.body))
		}
	}
}

// run runs the editors through the faults, drains the pool, runs the
// hostile burst and the checks.
func (h *harness) run(ctx context.Context) error {
	edCtx, stopEditors := context.WithCancel(ctx)
	defer stopEditors()
	feedCtx, stopFeeding := context.WithCancel(edCtx)
	defer stopFeeding()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stopEditors()

	h.rec.begin("warm-up")
	for _, e := range h.editors {
		if h.cfg.Workflow {
			wg.Go(func() { h.runWorkflowEditor(edCtx, e) })
		} else {
			wg.Go(func() { h.runEditor(edCtx, e) })
		}
	}
	wg.Go(func() { h.feed(feedCtx) })
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	var watching sync.WaitGroup
	watching.Go(func() { h.watchPurge(watchCtx) })
	defer watching.Wait()
	wg.Go(func() { h.progress(edCtx) })
	sleepCtx(ctx, h.cfg.FaultEvery)

	faults := h.faults()
	deadline := time.Now().Add(h.cfg.Duration)
	for round := 0; ctx.Err() == nil; round++ {
		order := faults
		if h.cfg.Soak && round > 0 {
			order = append([]fault(nil), faults...)
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		for _, f := range order {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if h.cfg.Soak && (h.assignments.Load() >= h.cfg.Assignments || time.Now().After(deadline)) {
				break
			}
			if err := h.runFault(ctx, f); err != nil {
				return fmt.Errorf("fault %s: %w", f.name, err)
			}
		}
		if !h.cfg.Soak || h.assignments.Load() >= h.cfg.Assignments || time.Now().After(deadline) {
			break
		}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// Drain: no new tasks; the editors work until every task is done.
	drain := h.rec.begin("drain")
	stopFeeding()
	if err := h.waitDrained(ctx, drain); err != nil {
		return err
	}
	stopEditors()
	wg.Wait()
	// Every finished task goes by retention; then the feed reader reads
	// what is left of the feed.
	h.waitPurged(ctx, drain)
	stopWatching()
	watching.Wait()
	for range 100 {
		if !h.readFeed(ctx, &h.purge.feedAfter) {
			break
		}
	}

	h.rec.begin("hostile")
	if err := h.hostileBurst(ctx); err != nil {
		return fmt.Errorf("hostile burst: %w", err)
	}
	h.rec.finish()
	return h.check(ctx)
}

// progress prints a line every 10 seconds.
func (h *harness) progress(ctx context.Context) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.rec.mu.Lock()
			nv := len(h.rec.viols)
			h.rec.mu.Unlock()
			p := h.rec.phase()
			h.logf("%5.0fs  %-16s assignments %d, submits %d, violations %d",
				time.Since(start).Seconds(), p.name, h.assignments.Load(), h.submits.Load(), nv)
		}
	}
}

// waitDrained waits until every task is done, but gold tasks and their
// copies (see goldFacts).
func (h *harness) waitDrained(ctx context.Context, p *phase) error {
	limit := 2 * time.Minute
	deadline := time.Now().Add(limit)
	for {
		var left int
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := h.sql.QueryRowContext(qctx, "SELECT COUNT(*) FROM tasks WHERE status <> 'done'"+notGoldSQL).Scan(&left)
		cancel()
		if err == nil && left == 0 {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			var detail string
			_ = h.sql.QueryRowContext(ctx, `SELECT CONCAT(COUNT(*), ' left, by status: ', GROUP_CONCAT(DISTINCT status))
				FROM tasks WHERE status <> 'done'`+notGoldSQL).Scan(&detail)
			h.rec.violate(p, "every task done", "pool not drained within %v of the last fault: %s (err %v)", limit, detail, err)
			return nil
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
}

func jsonUnmarshal(b []byte, v any) error {
	if err := jsonUnmarshalStrict(b, v); err != nil {
		return fmt.Errorf("decode %s: %w", trimBody(b), err)
	}
	return nil
}

// logTails returns, for a failed run, every error line of each taskd log
// (a 500's cause is there, however early it came) and the log's last lines.
func (h *harness) logTails() string {
	var out string
	for _, r := range h.replicas {
		path := filepath.Join(r.dir, "taskd.log")
		b, _ := os.ReadFile(path)
		var errs []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, `"level":"ERROR"`) {
				errs = append(errs, line)
			}
		}
		out += fmt.Sprintf("--- %s (%s)\n%d error lines:\n%s\nlast lines:\n%s\n", r.name, path, len(errs), strings.Join(errs, "\n"), tail(b, 4000))
	}
	return out
}
