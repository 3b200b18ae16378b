package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jmoiron/sqlx"
	"go.opentelemetry.io/otel/trace"

	"github.com/taskd/taskd/tasks"
)

// Config defaults.
const (
	// SkipForDefault is how long a skipped task is not offered to the same editor.
	SkipForDefault = 10 * time.Minute
	// ReleaseCooldownDefault is how long a task an editor released is not offered
	// to that editor again.
	ReleaseCooldownDefault = time.Minute
	// MaxHoldDefault caps how long heartbeats can keep one claim alive.
	MaxHoldDefault = 2 * time.Hour
	// InsertBatchSizeDefault is the number of rows per multi-row INSERT in InsertTasks.
	InsertBatchSizeDefault = 500
)

// Limits enforced by the store.
const (
	maxHolderLen       = 128
	maxTraceContextLen = 255
	maxDetailLen       = 1024 // characters; task_events.detail
	maxLastErrorLen    = 8192 // characters; well inside tasks.last_error (TEXT)
)

// Config configures a Store. The zero value is valid: WithDefaults fills in defaults.
type Config struct {
	// SkipFor is how long a task an editor skipped (Release with Skip) is not offered
	// to that editor again. Default SkipForDefault.
	SkipFor time.Duration
	// ReleaseCooldown is how long a task an editor released (Release without Skip)
	// is not offered to that editor again; everyone else may claim it at once. It
	// bounds how often one editor can claim one task, and so how fast a loop of
	// release and next grows the task's history: one claim per ReleaseCooldown.
	// It is kept as a skip is (task_skips), so a claim checks it with no extra
	// round trip. Default ReleaseCooldownDefault.
	ReleaseCooldown time.Duration
	// MaxHold caps the total time one claim can be held: heartbeats never extend a
	// lease beyond assigned_at + MaxHold. Default MaxHoldDefault.
	MaxHold time.Duration
	// InsertBatchSize is the number of rows per INSERT in InsertTasks. Default
	// InsertBatchSizeDefault.
	InsertBatchSize int
	// Replica, when set, is a read replica of the database (opened with Open):
	// Candidates and PoolStats read from it, while claims and every write stay on
	// the primary. A stale candidate costs only a refused claim; a replica that
	// answers no candidates is checked against the primary, so tasks it has not
	// received yet are still handed out. A replica that fails or hangs is left
	// alone for ReplicaRest while the primary answers.
	Replica *sqlx.DB
	// ReplicaTimeout bounds each read from the replica. Default
	// ReplicaTimeoutDefault.
	ReplicaTimeout time.Duration
	// ReplicaRest is how long a replica that failed a read gets no reads.
	// Default ReplicaRestDefault.
	ReplicaRest time.Duration
	// GroupCommit is the most claimants' writes one transaction carries (see
	// Store.Claim, Submit, SubmitAndClaim and Heartbeat): writes that arrive
	// while a transaction of them is in flight go together in the next, up to
	// GroupCommit of them, in one round trip and one commit; a write that finds
	// none in flight goes at once. 1 sends each alone. 1..1000, default
	// GroupCommitDefault.
	GroupCommit int
	// WebhookEvents are the events written to the webhook outbox, each in the
	// transaction of the change it reports, with no extra round trip. Empty
	// (the default): nothing is written, and the writes cost what they cost
	// without webhooks.
	WebhookEvents []tasks.WebhookEvent
	// Workflows are the workflows of the categories that have one (see
	// tasks.Workflow): a task inserted in one gets its stages and overlap
	// unless it names its own, and a task sent back there is reserved for its
	// SendBackHold. A category not in it has the default workflow.
	Workflows map[string]tasks.Workflow
}

// WithDefaults returns a copy of c with zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.SkipFor == 0 {
		c.SkipFor = SkipForDefault
	}
	if c.ReleaseCooldown == 0 {
		c.ReleaseCooldown = ReleaseCooldownDefault
	}
	if c.MaxHold == 0 {
		c.MaxHold = MaxHoldDefault
	}
	if c.InsertBatchSize == 0 {
		c.InsertBatchSize = InsertBatchSizeDefault
	}
	if c.GroupCommit == 0 {
		c.GroupCommit = GroupCommitDefault
	}
	if c.ReplicaTimeout == 0 {
		c.ReplicaTimeout = ReplicaTimeoutDefault
	}
	if c.ReplicaRest == 0 {
		c.ReplicaRest = ReplicaRestDefault
	}
	return c
}

// validate checks what the engine's Config does not configure. The values of
// its keys (SkipFor, ReleaseCooldown, MaxHold and GroupCommit, the keys of
// taskd.Config.Dispatch, and the webhooks' events) are the engine's to
// check, once, before New.
func (c Config) validate() error {
	if c.InsertBatchSize < 1 || c.InsertBatchSize > 5000 {
		return fmt.Errorf("%w: InsertBatchSize must be 1..5000", tasks.ErrInvalid)
	}
	if c.ReplicaTimeout < time.Millisecond || c.ReplicaRest < 0 {
		return fmt.Errorf("%w: ReplicaTimeout must be at least 1ms and ReplicaRest not negative", tasks.ErrInvalid)
	}
	return nil
}

// Store is the MySQL store of tasks, editors and their audit trail. It is safe for
// concurrent use.
type Store struct {
	db  *sqlx.DB
	cfg Config
	// outbox says which webhook events are written to the outbox.
	outbox map[tasks.WebhookEvent]bool
	// returning says whether the server supports INSERT ... RETURNING (MariaDB):
	// 0 not known yet, 1 yes, 2 no.
	returning atomic.Int32
	// galera is galeraUnknown, galeraOff or galeraOn (see onGalera).
	galera atomic.Int32
	// lockConflicts counts transactions that were deadlock victims or timed out
	// waiting for a lock.
	lockConflicts atomic.Int64
	// dbName is the name of the store's database, once asked (see database).
	dbName atomic.Pointer[string]
	// replica is nil without Config.Replica.
	replica *replica
	// group sends the claimants' writes in groups; nil when Config.GroupCommit
	// is 1.
	group *committer
	// limits are the limited categories (see limits.go); nil when none is.
	limits *limits
}

// NewStore returns a Store on db, which should come from Open (the fencing rules need
// its connection settings). Zero fields of cfg take their defaults; an invalid cfg
// returns an error wrapping ErrInvalid.
func New(db *sqlx.DB, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("new store: %w", err)
	}
	cfg.WebhookEvents = slices.Clone(cfg.WebhookEvents)
	lims, err := newLimits(cfg.Workflows)
	if err != nil {
		return nil, fmt.Errorf("new store: %w", err)
	}
	s := &Store{db: db, cfg: cfg, outbox: map[tasks.WebhookEvent]bool{}, limits: lims}
	for _, e := range cfg.WebhookEvents {
		s.outbox[e] = true
	}
	if cfg.GroupCommit > 1 {
		s.group = &committer{s: s, max: cfg.GroupCommit, flights: groupFlights}
	}
	if cfg.Replica != nil {
		s.replica = &replica{db: cfg.Replica, timeout: cfg.ReplicaTimeout, rest: cfg.ReplicaRest}
	}
	return s, nil
}

// Config returns the store's configuration with defaults applied.
func (s *Store) Config() Config { return s.cfg }

// DB returns the database handle the store uses.
func (s *Store) DB() *sqlx.DB { return s.db }

// commit commits tx, but returns when ctx ends even if the server has not
// answered the COMMIT yet (database/sql's Commit takes no context): the
// caller learns that the outcome is unknown instead of waiting on a server
// that stopped answering. The COMMIT goes on in the background until the
// server answers or the connection breaks; every write about a claim is
// fenced, so a caller that retries after an unknown outcome is refused, never
// applied twice.
func commit(ctx context.Context, tx *sqlx.Tx) error {
	done := make(chan error, 1)
	go func() { done <- tx.Commit() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("commit: outcome unknown: %w", context.Cause(ctx))
	}
}

// rollback rolls tx back, but returns when ctx ends even if the server has
// not answered the ROLLBACK yet: database/sql's Rollback takes no context,
// and the driver waits for the server's answer with no deadline, so a server
// that stops answering between a transaction's last statement and its
// ROLLBACK would hold the caller until it answers again. The ROLLBACK goes on
// in the background until the server answers or the connection breaks. Once
// ctx has ended, database/sql rolls the transaction back by itself and
// discards the connection, in the background; rollback then does nothing: a
// Rollback of its own could win that race and wait all the same.
func rollback(ctx context.Context, tx *sqlx.Tx) {
	if ctx.Err() != nil {
		return
	}
	done := make(chan struct{})
	go func() {
		_ = tx.Rollback()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// txAttempts bounds how often inTx runs a transaction that InnoDB picked as a deadlock
// victim.
const txAttempts = 3

// inTx runs fn in a transaction and commits it if fn returns nil, retrying deadlock
// victims (see retryDeadlocks). fn must therefore set, not accumulate, whatever it
// hands back to its caller.
func (s *Store) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	return s.retryDeadlocks(ctx, func() error { return s.runTx(ctx, fn) })
}

// retryDeadlocks runs a transaction, run, again when InnoDB picked it as a deadlock
// victim, which rolls all of it back: up to txAttempts times in all, after a short
// random pause. A transaction that still loses, or whose lock wait timed out, returns
// an error wrapping ErrBusy and the server's error.
//
// Deadlocks should not happen: every transaction runs at READ COMMITTED, so locking
// reads take no gap locks, no index on tasks is unique but the primary key, and rows
// are locked in one order, an editor's row before task rows (a skip, whose record's
// foreign key locks the editor's row, locks it first too). The retries are for what
// is left unforeseen.
func (s *Store) retryDeadlocks(ctx context.Context, run func() error) error {
	for attempt := 1; ; attempt++ {
		err := run()
		if err == nil || !mysqlErrorIs(err, erLockDeadlock, erLockWaitTimeout) {
			return err
		}
		s.lockConflicts.Add(1)
		if attempt == txAttempts || mysqlErrorIs(err, erLockWaitTimeout) {
			return fmt.Errorf("%w: %w", tasks.ErrBusy, err)
		}
		pause := time.NewTimer(time.Duration(1+rand.IntN(5*attempt)) * time.Millisecond)
		select {
		case <-ctx.Done():
			pause.Stop()
			return fmt.Errorf("%w: %w", tasks.ErrBusy, err)
		case <-pause.C:
		}
	}
}

func (s *Store) runTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.db.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		rollback(ctx, tx)
		return err
	}
	return commit(ctx, tx)
}

// expectOne checks that a fenced write matched exactly one row. Anything else means the
// claim is stale and the caller must roll back.
func expectOne(res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return tasks.ErrStale
	}
	return nil
}

// event is one audit record to write.
type event struct {
	taskID   int64
	kind     tasks.EventKind
	fence    int64
	holder   string
	editorID int64
	detail   string
	// category and cause are for the webhook outbox, which records the
	// events of the kinds webhookEventOf maps.
	category string
	cause    tasks.WebhookCause
	// goldCopy says the task is a copy of a gold task: its events go to the
	// audit history only, never to the webhook outbox (gold work is never
	// sent to webhooks).
	goldCopy bool
}

const (
	insertEventsSQL = `INSERT INTO task_events (task_id, kind, fence, holder, editor_id, detail, trace_id) VALUES `
	insertOutboxSQL = `INSERT INTO webhook_outbox (kind, task_id, fence, holder, editor_id, category, cause, detail) VALUES `
)

// insertEvents writes audit records in one multi-row INSERT, each with the trace
// id of ctx's sampled span (see traceOf), and, in the same statement batch (one
// round trip), the webhook outbox's records of those the store's
// Config.WebhookEvents ask for. Their holders and details come from callers, so a
// value the server refuses is an error wrapping ErrInvalid (see refusedValue).
func (s *Store) insertEvents(ctx context.Context, tx *sqlx.Tx, evs ...event) error {
	if len(evs) == 0 {
		return nil
	}
	var q strings.Builder
	args := s.writeEventsSQL(&q, traceOf(ctx), evs)
	_, err := s.execInTx(ctx, tx, q.String(), args)
	return refusedValue(err)
}

// writeEventsSQL writes the statements insertEvents runs for evs (at least one),
// each with traceID (traceOf's) as its trace id, to q, without a final semicolon,
// and returns their arguments, so that a caller can send further statements in
// the same round trip.
func (s *Store) writeEventsSQL(q *strings.Builder, traceID any, evs []event) []any {
	q.WriteString(insertEventsSQL)
	args := make([]any, 0, 7*len(evs))
	for i, e := range evs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ")
		args = append(args, e.taskID, string(e.kind), e.fence,
			nullString(e.holder), nullID(e.editorID), nullString(truncate(e.detail, maxDetailLen)))
		args = append(args, traceSQL(q, traceID)...)
		q.WriteString(")")
	}
	first := true
	for _, e := range evs {
		kind, ok := webhookEventOf(e.kind)
		if !ok || !s.outbox[kind] || e.goldCopy {
			continue
		}
		if first {
			q.WriteString(";\n")
			q.WriteString(insertOutboxSQL)
			first = false
		} else {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?)")
		args = append(args, string(kind), e.taskID, e.fence, nullString(e.holder), nullID(e.editorID),
			e.category, string(e.cause), nullString(truncate(e.detail, maxDetailLen)))
	}
	return args
}

// traceOf is the trace id of ctx's sampled span, as the argument that traceSQL
// and tracesSQL write to task_events.trace_id: its 32 hex digits, or nil (NULL)
// when ctx carries no span or an unsampled one, whose trace no backend keeps.
// Without tracing it costs a context lookup and writes no argument.
func traceOf(ctx context.Context) any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsSampled() {
		return nil
	}
	return sc.TraceID().String()
}

// traceSQL writes the value of task_events.trace_id for traceID (traceOf's) to
// q, NULL without one, and returns its arguments.
func traceSQL(q *strings.Builder, traceID any) []any {
	if traceID == nil {
		q.WriteString("NULL")
		return nil
	}
	q.WriteString("UNHEX(?)")
	return []any{traceID}
}

// tracesSQL writes the value of task_events.trace_id for each of ids, in a
// SELECT from tasks, to q: traces[i] (traceOf's) for ids[i], one NULL when none
// has a trace. It returns the arguments.
func tracesSQL(q *strings.Builder, ids []int64, traces []any) []any {
	if !slices.ContainsFunc(traces, func(t any) bool { return t != nil }) {
		q.WriteString("NULL")
		return nil
	}
	q.WriteString("UNHEX(")
	args := valuesSQL(q, ids, traces)
	q.WriteString(")")
	return args
}

// nullString maps "" to NULL.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullID maps 0 to NULL.
func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// truncate shortens s to at most n characters (runes), cutting at a rune boundary.
// Invalid UTF-8 is replaced so the text always fits a utf8mb4 column.
func truncate(s string, n int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}

// micros converts a duration to whole microseconds for INTERVAL ? MICROSECOND.
func micros(d time.Duration) int64 { return d.Microseconds() }

// checkLease validates a lease and truncates it to milliseconds.
func (s *Store) checkLease(d time.Duration) (time.Duration, error) {
	d = d.Truncate(time.Millisecond)
	if d < tasks.LeaseMin || d > s.cfg.MaxHold {
		return 0, fmt.Errorf("%w: lease must be between %v and max hold %v", tasks.ErrInvalid, tasks.LeaseMin, s.cfg.MaxHold)
	}
	return d, nil
}

// checkHolder validates a holder string. Leading and trailing spaces are refused
// because the database compares with PAD SPACE ("w1" = "w1 ").
func checkHolder(h string) error {
	if h == "" || utf8.RuneCountInString(h) > maxHolderLen || !utf8.ValidString(h) {
		return fmt.Errorf("%w: holder must be 1..%d characters", tasks.ErrInvalid, maxHolderLen)
	}
	if strings.TrimSpace(h) != h {
		return fmt.Errorf("%w: holder must not start or end with spaces", tasks.ErrInvalid)
	}
	return nil
}

// lostRace turns a lock conflict while claiming (ErrBusy) into ErrStale, keeping the
// cause's text: another transaction was working on the same rows, and this claim, which
// was rolled back, lost the race; the caller moves on to its next candidate. Other
// errors pass through.
func lostRace(err error) error {
	if errors.Is(err, tasks.ErrBusy) {
		return fmt.Errorf("%w (%v)", tasks.ErrStale, err)
	}
	return err
}
