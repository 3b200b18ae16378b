package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Retention under faults: the replicas purge finished data a few seconds
// after it finished (purgeRetention), in small batches (purgeBatch), at every
// sweep, through the whole run and its faults. So that the checks still see
// every task, result and event the run made, the harness archives each row
// the purge deletes: an AFTER DELETE trigger on tasks, task_results and
// task_events copies it, with the time of its deletion on the database
// clock, into a chaos_purged_* table (taskd deletes those rows nowhere but
// in a purge batch; task_skips go by ON DELETE CASCADE, which fires no
// trigger). The checks read the live rows and the archived ones together,
// and check the purge itself:
//
//   - every purged task had ended (done, cancelled or dead) more than its
//     retention before the purge deleted it, on the database clock: no
//     pending or assigned task purged;
//   - no result, event or skip without its task, during the run (each
//     second, one statement each) and after;
//   - every 404 a late write got names a task that was purged (the
//     documented answer about a purged task; a late write about a task
//     still there must be 409 stale_fence);
//   - the results feed, read by the harness throughout the run after its
//     last cursor: cursors strictly increase, and between two cursors read
//     without a 410 there was no result (live or archived) with a cursor
//     between them; a 410 cursor_expired names an oldest_cursor that is a
//     purged result's.
const (
	purgeDone      = 2 * time.Second
	purgeCancelled = 2 * time.Second
	purgeDead      = 5 * time.Second
	purgeWebhooks  = 2 * time.Second
	// purgeBatch is small, so that a backlog takes many batches: a kill of
	// the sweeping process lands inside one.
	purgeBatch = 20
	// Every feedLagEvery the feed reader stops reading, until the purge
	// passed its cursor or for at most feedLag, to fall behind what is kept.
	feedLagEvery = 15 * time.Second
	feedLag      = 20 * time.Second
)

// retentionEnv is the replicas' retention configuration.
func retentionEnv() []string {
	return []string{
		"TASKD_RETENTION_DONE=" + purgeDone.String(),
		"TASKD_RETENTION_CANCELLED=" + purgeCancelled.String(),
		"TASKD_RETENTION_DEAD=" + purgeDead.String(),
		"TASKD_RETENTION_WEBHOOKS=" + purgeWebhooks.String(),
		"TASKD_RETENTION_BATCH=" + strconv.Itoa(purgeBatch),
	}
}

// retentionOf is the retention of an ended status.
func retentionOf(status string) time.Duration {
	switch status {
	case "done":
		return purgeDone
	case "cancelled":
		return purgeCancelled
	case "dead":
		return purgeDead
	}
	return 0
}

// archiveDDL creates the archive tables and the triggers that fill them.
var archiveDDL = []string{
	`CREATE TABLE IF NOT EXISTS chaos_purged_tasks (
  n BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  id BIGINT NOT NULL, fence BIGINT NOT NULL, status VARCHAR(16) NOT NULL, category VARCHAR(255) NOT NULL,
  stage INT NOT NULL, stage_count INT NOT NULL, stages TEXT NULL, group_id BIGINT NULL,
  done_at DATETIME(3) NULL, purged_at DATETIME(3) NOT NULL) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS chaos_purged_results (
  n BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  task_id BIGINT NOT NULL, fence BIGINT NOT NULL, editor_id BIGINT NULL, stage INT NOT NULL,
  decision VARCHAR(64) NULL, submitted_at DATETIME(3) NOT NULL, seq BIGINT NULL, claimed_at DATETIME(3) NULL,
  purged_at DATETIME(3) NOT NULL) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS chaos_purged_events (
  n BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
  id BIGINT NOT NULL, task_id BIGINT NOT NULL, kind VARCHAR(32) NOT NULL, fence BIGINT NOT NULL,
  editor_id BIGINT NULL, ` + "`at`" + ` DATETIME(3) NOT NULL, detail VARCHAR(1024) NULL, purged_at DATETIME(3) NOT NULL) ENGINE=InnoDB`,
	// chaos_purge_pace's delay (seconds) slows each task the purge deletes, so
	// that purgeFault catches a batch in flight; 0 outside that fault.
	`CREATE TABLE IF NOT EXISTS chaos_purge_pace (id TINYINT NOT NULL PRIMARY KEY, delay DOUBLE NOT NULL) ENGINE=InnoDB`,
	`INSERT IGNORE INTO chaos_purge_pace VALUES (1, 0)`,
	`CREATE TRIGGER chaos_archive_tasks AFTER DELETE ON tasks FOR EACH ROW BEGIN
  INSERT INTO chaos_purged_tasks (id, fence, status, category, stage, stage_count, stages, group_id, done_at, purged_at)
  VALUES (OLD.id, OLD.fence, OLD.status, OLD.category, OLD.stage, OLD.stage_count, OLD.stages, OLD.group_id, OLD.done_at, NOW(3));
  SET @chaos_pace = (SELECT delay FROM chaos_purge_pace WHERE id = 1);
  IF @chaos_pace > 0 THEN SET @chaos_slept = SLEEP(@chaos_pace); END IF;
END`,
	`CREATE TRIGGER chaos_archive_results AFTER DELETE ON task_results FOR EACH ROW
  INSERT INTO chaos_purged_results (task_id, fence, editor_id, stage, decision, submitted_at, seq, claimed_at, purged_at)
  VALUES (OLD.task_id, OLD.fence, OLD.editor_id, OLD.stage, OLD.decision, OLD.submitted_at, OLD.seq, OLD.claimed_at, NOW(3))`,
	"CREATE TRIGGER chaos_archive_events AFTER DELETE ON task_events FOR EACH ROW\n" +
		"  INSERT INTO chaos_purged_events (id, task_id, kind, fence, editor_id, `at`, detail, purged_at)\n" +
		"  VALUES (OLD.id, OLD.task_id, OLD.kind, OLD.fence, OLD.editor_id, OLD.`at`, OLD.detail, NOW(3))",
}

// archivePurged creates the archive tables and their triggers, after the
// migration and before any replica starts.
func (h *harness) archivePurged(ctx context.Context) error {
	for _, q := range archiveDDL {
		if _, err := h.sql.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("archive purged rows: %w", err)
		}
	}
	return nil
}

// The union of live and archived rows the checks read.
var (
	allTasksSQL = "SELECT id, fence, " + b("status") + ", " + b("category") + ", stage, stage_count, " + b("COALESCE(stages, '')") + ", COALESCE(group_id, 0) FROM tasks\n" +
		"UNION ALL SELECT id, fence, " + b("status") + ", " + b("category") + ", stage, stage_count, " + b("COALESCE(stages, '')") + ", COALESCE(group_id, 0) FROM chaos_purged_tasks"
	allResultsSQL = "SELECT task_id, fence, editor_id, stage, decision, submitted_at FROM (\n" +
		"SELECT task_id, fence, COALESCE(editor_id, 0) AS editor_id, stage, " + b("COALESCE(decision, '')") + " AS decision, submitted_at FROM task_results\n" +
		"UNION ALL SELECT task_id, fence, COALESCE(editor_id, 0), stage, " + b("COALESCE(decision, '')") + ", submitted_at FROM chaos_purged_results) r\n" +
		"ORDER BY task_id, fence"
	// The events include those a claim without them has in its stead (a
	// worker's: see the store's logClaimsSQL): a result row with claimed_at is
	// its claim's 'claimed' and 'submitted' events, a live task's row marked
	// claim_unlogged its 'claimed' event; their ids (the store's
	// DerivedEventID) follow every event's, claimed before submitted.
	allEventsSQL = "SELECT id, task_id, kind, fence, editor_id, `at`, detail FROM (" +
		"SELECT id, task_id, " + b("kind") + " AS kind, fence, COALESCE(editor_id, 0) AS editor_id, `at`, " + b("COALESCE(detail, '')") + " AS detail FROM task_events " +
		"UNION ALL SELECT id, task_id, " + b("kind") + ", fence, COALESCE(editor_id, 0), `at`, " + b("COALESCE(detail, '')") + " FROM chaos_purged_events " +
		"UNION ALL SELECT (1 << 52) + 2 * fence + k.n, task_id, " + b("IF(k.n = 0, 'claimed', 'submitted')") + ", fence, COALESCE(editor_id, 0), " +
		"IF(k.n = 0, claimed_at, submitted_at), " + b("''") + " FROM (SELECT task_id, fence, editor_id, claimed_at, submitted_at FROM task_results WHERE claimed_at IS NOT NULL " +
		"UNION ALL SELECT task_id, fence, editor_id, claimed_at, submitted_at FROM chaos_purged_results WHERE claimed_at IS NOT NULL) r " +
		"JOIN (SELECT 0 AS n UNION ALL SELECT 1) k " +
		"UNION ALL SELECT (1 << 52) + 2 * fence, id, " + b("'claimed'") + ", fence, COALESCE(editor_id, 0), assigned_at, " + b("''") + " FROM tasks WHERE claim_unlogged = 1" +
		") e ORDER BY "
)

const (
	// orphansSQL counts results, events and skips without their task.
	orphansSQL = `SELECT
  (SELECT COUNT(*) FROM task_results r LEFT JOIN tasks t ON t.id = r.task_id WHERE t.id IS NULL),
  (SELECT COUNT(*) FROM task_events e LEFT JOIN tasks t ON t.id = e.task_id WHERE t.id IS NULL),
  (SELECT COUNT(*) FROM task_skips s LEFT JOIN tasks t ON t.id = s.task_id WHERE t.id IS NULL)`
)

// b gives a string column one collation on both sides of a UNION.
func b(col string) string {
	return "CAST(" + col + " AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_bin"
}

// purgeState is what the harness saw of the purge and the feed during the run.
type purgeState struct {
	mu sync.Mutex
	// steps are the feed reader's pages in order: each the cursor asked
	// after and the cursors received, or a 410's oldest cursor.
	steps []feedStep
	// orphanReads counts the orphan statements run during the run;
	// orphans the results, events and skips found without their task.
	orphanReads, orphans int64
	orphanWhat           []string
	// gone are the late writes answered 404: the task must be purged.
	gone []goneWrite
	// killedMidPurge counts the kills of a process while it ran a purge
	// statement; killedSweeper the kills of the process that purged last.
	killedMidPurge, killedSweeper int
	// feedAfter is the feed reader's cursor.
	feedAfter int64
}

type feedStep struct {
	after   int64
	cursors []int64
	expired int64 // the 410's oldest_cursor; 0 for a page
	at      time.Time
}

type goneWrite struct {
	what string
	task int64
	at   time.Time
}

// PurgeCounts are the purge's figures in the report.
type PurgeCounts struct {
	RetentionDoneSeconds float64 `json:"retention_done_seconds"`
	Batch                int     `json:"batch"`
	// Tasks, Results and Events are the rows the purge deleted (archived).
	Tasks   int64 `json:"tasks_purged"`
	Results int64 `json:"results_purged"`
	Events  int64 `json:"events_purged"`
	// Live is the tasks still in the table at the checks.
	Live int64 `json:"tasks_live"`
	// FeedResults is the results the feed reader read; FeedExpired the 410
	// cursor_expired answers it got, FeedSkipped the cursors those made it
	// skip.
	FeedResults int64 `json:"feed_results"`
	FeedExpired int64 `json:"feed_410s"`
	FeedSkipped int64 `json:"feed_cursors_skipped"`
	// OrphanReads is how often the run looked for rows without their task.
	OrphanReads int64 `json:"orphan_reads"`
	// GoneWrites is the late writes answered 404 about a purged task.
	GoneWrites int64 `json:"late_writes_404"`
	// KilledMidPurge counts kills of a replica caught running a purge
	// statement; KilledSweeper kills of the replica that purged last, when
	// none was caught in a statement.
	KilledMidPurge int `json:"killed_mid_purge"`
	KilledSweeper  int `json:"killed_last_purger"`
}

// noteGone records a late write answered 404.
func (h *harness) noteGone(what string, task int64) {
	h.purge.mu.Lock()
	h.purge.gone = append(h.purge.gone, goneWrite{what: what, task: task, at: time.Now()})
	h.purge.mu.Unlock()
}

// watchPurge reads the results feed after its last cursor and looks for
// rows without their task, about every second, until ctx ends.
func (h *harness) watchPurge(ctx context.Context) {
	lagAt := time.Now().Add(feedLagEvery)
	for ctx.Err() == nil {
		if time.Now().After(lagAt) {
			// Fall behind the retention, until the purge passed the
			// cursor (task_results_feed's row 2 is the highest purged
			// cursor) or feedLag: the next read must be a 410, never a
			// silent gap.
			for end := time.Now().Add(feedLag); time.Now().Before(end) && ctx.Err() == nil; {
				h.readOrphans(ctx)
				var purged int64
				qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				err := h.sql.QueryRowContext(qctx, "SELECT COALESCE(MAX(last_seq), 0) FROM task_results_feed WHERE id = 2").Scan(&purged)
				cancel()
				if err == nil && purged > h.purge.feedAfter {
					break
				}
				sleepCtx(ctx, 500*time.Millisecond)
			}
			lagAt = time.Now().Add(feedLagEvery)
		}
		more := h.readFeed(ctx, &h.purge.feedAfter)
		h.readOrphans(ctx)
		if !more {
			sleepCtx(ctx, 500*time.Millisecond)
		}
	}
}

// readFeed reads one page of the feed after *after and moves it on; true
// when the page was full.
func (h *harness) readFeed(ctx context.Context, after *int64) bool {
	base := h.router.pick()
	resp := call(ctx, h.admin, base, "GET", "/v1/results?limit=500&after="+strconv.FormatInt(*after, 10), adminToken, nil, h.cfg.RequestBound)
	h.router.done(base)
	if ctx.Err() != nil {
		return false
	}
	p := h.rec.observe("results feed "+base, resp)
	switch {
	case resp.status == http.StatusOK:
		step := feedStep{after: *after, at: time.Now()}
		more := false
		for line := range bytes.SplitSeq(resp.body, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var l struct {
				Cursor     *string `json:"cursor"`
				NextCursor *string `json:"next_cursor"`
				More       bool    `json:"more"`
			}
			if err := json.Unmarshal(line, &l); err != nil {
				break // a cut answer: its whole lines stand
			}
			if l.Cursor != nil {
				c, err := strconv.ParseInt(*l.Cursor, 10, 64)
				if err != nil {
					h.rec.violate(p, "results feed", "a cursor that is not a number: %q", *l.Cursor)
					break
				}
				step.cursors = append(step.cursors, c)
				*after = c
			}
			if l.NextCursor != nil {
				more = l.More
			}
		}
		h.purge.mu.Lock()
		h.purge.steps = append(h.purge.steps, step)
		h.purge.mu.Unlock()
		return more
	case resp.status == http.StatusGone && resp.code() == "cursor_expired":
		var e struct {
			Error struct {
				OldestCursor string `json:"oldest_cursor"`
			} `json:"error"`
		}
		_ = json.Unmarshal(resp.body, &e)
		oldest, err := strconv.ParseInt(e.Error.OldestCursor, 10, 64)
		if err != nil || oldest <= *after {
			h.rec.violate(p, "results feed", "410 after cursor %d with oldest_cursor %q: %s", *after, e.Error.OldestCursor, trimBody(resp.body))
			return false
		}
		h.purge.mu.Lock()
		h.purge.steps = append(h.purge.steps, feedStep{after: *after, expired: oldest, at: time.Now()})
		h.purge.mu.Unlock()
		*after = oldest
		return true
	case resp.status == 0 || resp.status == http.StatusServiceUnavailable:
		backoff(ctx)
	default:
		h.rec.violate(p, "results feed", "GET /v1/results after %d: %d %s", *after, resp.status, trimBody(resp.body))
		backoff(ctx)
	}
	return false
}

// readOrphans counts the results, events and skips without their task, in
// one statement (one snapshot).
func (h *harness) readOrphans(ctx context.Context) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var r, e, s int64
	if err := h.sql.QueryRowContext(qctx, orphansSQL).Scan(&r, &e, &s); err != nil {
		return // a store down: the next read
	}
	h.purge.mu.Lock()
	defer h.purge.mu.Unlock()
	h.purge.orphanReads++
	if r+e+s > 0 {
		h.purge.orphans += r + e + s
		if len(h.purge.orphanWhat) < 10 {
			h.purge.orphanWhat = append(h.purge.orphanWhat, fmt.Sprintf("at %s: %d results, %d events, %d skips without their task",
				time.Now().Format(time.RFC3339Nano), r, e, s))
		}
	}
}

// purgeFault kills -9 the replica that is purging: the one caught running a
// purge statement (information_schema.PROCESSLIST, mapped by its connection's
// port to the process), or else the one whose log shows the latest sweep
// that purged. It waits up to 20 s for a backlog (tasks past retention) and
// a caught statement; then restarts the replica.
func (h *harness) purgeFault(ctx context.Context, p *phase) error {
	var victim *replica
	mid := false
	// Each task a batch deletes now takes purgeSlowRow, so that a batch is in
	// flight long enough to be caught; the pace is back to normal once the
	// victim is chosen.
	if err := h.purgePace(ctx, purgeSlowRow); err != nil {
		return err
	}
	defer func() { _ = h.purgePace(context.WithoutCancel(ctx), 0) }()
	deadline := time.Now().Add(20 * time.Second)
	for victim == nil && time.Now().Before(deadline) && ctx.Err() == nil {
		if r := h.purgingReplica(ctx); r != nil {
			victim, mid = r, true
			break
		}
		sleepCtx(ctx, 5*time.Millisecond)
	}
	if victim == nil {
		victim = h.lastPurger()
	}
	if err := victim.Kill(); err != nil {
		return err
	}
	if err := h.purgePace(ctx, 0); err != nil {
		return err
	}
	h.purge.mu.Lock()
	if mid {
		h.purge.killedMidPurge++
	} else {
		h.purge.killedSweeper++
	}
	h.purge.mu.Unlock()
	how := "the replica that purged last (no purge statement caught)"
	if mid {
		how = "while it ran a purge statement"
	}
	p.notes = append(p.notes, fmt.Sprintf("%s killed %s", victim.name, how))
	h.router.setOut(victim.Base(), true)
	sleepCtx(ctx, h.cfg.Lease+h.cfg.SweepInterval+500*time.Millisecond)
	p.markRecovered()
	err := victim.Start(ctx)
	h.router.setOut(victim.Base(), false)
	return err
}

// purgeSlowRow is how long each task a purge batch deletes takes during
// purgeFault: a batch of purgeBatch tasks then runs for about a second.
const purgeSlowRow = 50 * time.Millisecond

// purgePace sets how long each task the purge deletes takes, beyond its own
// time (the archive trigger sleeps it).
func (h *harness) purgePace(ctx context.Context, d time.Duration) error {
	if _, err := h.sql.ExecContext(ctx, `UPDATE chaos_purge_pace SET delay = ? WHERE id = 1`, d.Seconds()); err != nil {
		return fmt.Errorf("purge pace: %w", err)
	}
	return nil
}

// purgingReplica returns the replica with a connection running a purge
// statement now (information_schema.PROCESSLIST), or nil. Inside the archive
// trigger, PROCESSLIST shows the trigger's statement: its sleep is the
// purge's DELETE of tasks, in the batch's transaction.
func (h *harness) purgingReplica(ctx context.Context) *replica {
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var host string
	err := h.sql.QueryRowContext(qctx, `SELECT HOST FROM information_schema.PROCESSLIST
WHERE INFO LIKE 'DELETE FROM task%' OR INFO LIKE 'SELECT id FROM tasks FORCE INDEX (PRIMARY)%'
  OR INFO LIKE 'SELECT DISTINCT group_id FROM tasks%' OR INFO LIKE 'SELECT task_id, seq FROM task_results FORCE INDEX (PRIMARY)%'
  OR INFO LIKE 'INSERT INTO task_results_feed (id, last_seq) VALUES (2%'
  OR INFO LIKE 'SET @chaos_slept = SLEEP(%' LIMIT 1`).Scan(&host)
	if err != nil {
		return nil
	}
	_, portText, ok := strings.Cut(host, ":")
	port, perr := strconv.Atoi(portText)
	if !ok || perr != nil {
		return nil
	}
	inode := socketInode(port)
	if inode == "" {
		return nil
	}
	for _, r := range h.replicas[:h.cfg.Replicas] {
		if r.proc != nil && !r.proc.exited() && holdsSocket(r.proc.pid(), inode) {
			return r
		}
	}
	return nil
}

// socketInode returns the inode of the loopback TCP socket whose local port
// is port, from /proc/net/tcp and tcp6.
func socketInode(port int) string {
	want := fmt.Sprintf(":%04X", port)
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			fs := strings.Fields(line)
			if len(fs) > 9 && strings.HasSuffix(fs[1], want) {
				return fs[9]
			}
		}
	}
	return ""
}

// holdsSocket reports whether process pid has the socket inode open.
func holdsSocket(pid int, inode string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	want := "socket:[" + inode + "]"
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == want {
			return true
		}
	}
	return false
}

// lastPurger returns the replica whose log has the latest sweep line with
// rows purged, or the second replica.
func (h *harness) lastPurger() *replica {
	best, bestAt := h.replicas[1], time.Time{}
	for _, r := range h.replicas[:h.cfg.Replicas] {
		f, err := os.Open(filepath.Join(r.dir, "taskd.log"))
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var l struct {
				Time   time.Time `json:"time"`
				Msg    string    `json:"msg"`
				Purged int64     `json:"purged"`
			}
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "sweep" && l.Purged > 0 && l.Time.After(bestAt) {
				best, bestAt = r, l.Time
			}
		}
		f.Close()
	}
	return best
}

// waitPurged waits, after the drain, until the purge has deleted every task
// but those after maxID (up to a minute), so that no purge runs under the
// hostile burst's before-and-after snapshot.
func (h *harness) waitPurged(ctx context.Context, p *phase) {
	deadline := time.Now().Add(time.Minute)
	for ctx.Err() == nil {
		var left int64
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		// Gold tasks are kept, and a copy left pending is purged only after a
		// sweep cancelled it (see goldFacts): both are left out.
		err := h.sql.QueryRowContext(qctx, "SELECT COUNT(*) FROM tasks WHERE TRUE"+notGoldSQL).Scan(&left)
		cancel()
		if err == nil && left == 0 {
			return
		}
		if time.Now().After(deadline) {
			h.rec.violate(p, "finished tasks purged", "%d tasks left a minute after the drain, with done retention %v (err %v)", left, purgeDone, err)
			return
		}
		sleepCtx(ctx, 250*time.Millisecond)
	}
}

// checkPurge checks the purge and the feed; called from check.
func (h *harness) checkPurge(ctx context.Context, add func(name string, checked int64, fs []finding)) error {
	// Purged tasks had ended, longer than their retention ago.
	var fs []finding
	var n int64
	const live = "no pending or assigned task purged, none before its retention"
	err := h.query(ctx, "read purged tasks", "SELECT id, status, done_at, purged_at FROM chaos_purged_tasks", func(scan func(...any) error) error {
		var id int64
		var status string
		var doneAt *time.Time
		var purgedAt time.Time
		if err := scan(&id, &status, &doneAt, &purgedAt); err != nil {
			return err
		}
		n++
		ret := retentionOf(status)
		switch {
		case ret == 0:
			fs = append(fs, found(live, "task %d purged while %s", id, status))
		case doneAt == nil:
			fs = append(fs, found(live, "task %d purged %s without an end time", id, status))
		case purgedAt.Sub(*doneAt) < ret-time.Millisecond:
			fs = append(fs, found(live, "task %d purged %v after it ended %s, retention %v", id, purgedAt.Sub(*doneAt), status, ret))
		}
		return nil
	})
	if err != nil {
		return err
	}
	h.purgeCounts.Tasks = n
	add(live, n, fs)

	// No result, event or skip without its task, during and after.
	h.readOrphans(ctx)
	h.purge.mu.Lock()
	fs = nil
	for _, w := range h.purge.orphanWhat {
		fs = append(fs, found("no result, event or skip without its task", "%s", w))
	}
	h.purgeCounts.OrphanReads = h.purge.orphanReads
	add("no result, event or skip without its task (LEFT JOIN, each second and after)", h.purge.orphanReads, fs)
	gone := append([]goneWrite(nil), h.purge.gone...)
	steps := append([]feedStep(nil), h.purge.steps...)
	h.purge.mu.Unlock()
	h.purgeCounts.KilledMidPurge, h.purgeCounts.KilledSweeper = h.purge.killedMidPurge, h.purge.killedSweeper

	if err := h.sql.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM chaos_purged_results), (SELECT COUNT(*) FROM chaos_purged_events), (SELECT COUNT(*) FROM tasks)").
		Scan(&h.purgeCounts.Results, &h.purgeCounts.Events, &h.purgeCounts.Live); err != nil {
		return fmt.Errorf("count purged rows: %w", err)
	}

	// A 404 to a late write: its task was purged.
	purged := make(map[int64]bool)
	err = h.query(ctx, "read purged task ids", "SELECT id FROM chaos_purged_tasks", func(scan func(...any) error) error {
		var id int64
		if err := scan(&id); err != nil {
			return err
		}
		purged[id] = true
		return nil
	})
	if err != nil {
		return err
	}
	fs = nil
	for _, g := range gone {
		if !purged[g.task] {
			fs = append(fs, found("a late write's 404 is about a purged task", "%s answered 404 at %s, but task %d was not purged",
				g.what, g.at.Format(time.RFC3339Nano), g.task))
		}
	}
	h.purgeCounts.GoneWrites = int64(len(gone))
	add("late writes answered 404 only about a purged task", int64(len(gone)), fs)

	// The feed: every numbered result, live or purged.
	var seqs []int64
	purgedSeq := make(map[int64]bool)
	err = h.query(ctx, "read result cursors", "SELECT seq, 0 FROM task_results WHERE seq IS NOT NULL AND seq > 0 UNION ALL SELECT seq, 1 FROM chaos_purged_results WHERE seq IS NOT NULL AND seq > 0 ORDER BY 1",
		func(scan func(...any) error) error {
			var s int64
			var isPurged bool
			if err := scan(&s, &isPurged); err != nil {
				return err
			}
			seqs = append(seqs, s)
			if isPurged {
				purgedSeq[s] = true
			}
			return nil
		})
	if err != nil {
		return err
	}
	n, fs = checkFeed(steps, seqs, purgedSeq, &h.purgeCounts)
	add("results feed: cursors increase, no silent gap, 410 only past a purged cursor", n, fs)
	return nil
}

// checkFeed checks the feed reader's steps against every numbered result
// (seqs, ascending; purged those purged): cursors strictly increase, no
// result's cursor lies between two cursors read without a 410 between them,
// and a 410's oldest cursor is a purged result's. It counts what it read.
func checkFeed(steps []feedStep, seqs []int64, purged map[int64]bool, c *PurgeCounts) (int64, []finding) {
	const name = "results feed"
	var fs []finding
	var last int64 // the last cursor read, or skipped to by a 410
	// between returns the cursors of results in (lo, hi).
	between := func(lo, hi int64) []int64 {
		var out []int64
		for _, s := range seqs {
			if s > lo && s < hi {
				out = append(out, s)
			}
		}
		return out
	}
	for _, st := range steps {
		if st.after != last {
			fs = append(fs, found(name, "read after cursor %d, but the last cursor was %d", st.after, last))
		}
		if st.expired != 0 {
			c.FeedExpired++
			c.FeedSkipped += int64(len(between(last, st.expired+1)))
			if !purged[st.expired] {
				fs = append(fs, found(name, "410 after cursor %d named oldest_cursor %d, which is no purged result's", last, st.expired))
			}
			last = st.expired
			continue
		}
		for _, cur := range st.cursors {
			c.FeedResults++
			if cur <= last {
				fs = append(fs, found(name, "cursor %d after cursor %d", cur, last))
				continue
			}
			if gap := between(last, cur); len(gap) > 0 {
				fs = append(fs, found(name, "silent gap: cursor %d followed %d without a 410, over %d results (first %d, purged %v)",
					cur, last, len(gap), gap[0], purged[gap[0]]))
			}
			last = cur
		}
	}
	return c.FeedResults, fs
}
