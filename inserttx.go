package taskd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/taskd/taskd/internal/store"
)

// The watch of InsertTx's transactions (see DispatchConfig.InsertTxWaiters).
const (
	// insertTxQueue bounds the transactions waiting for a waiter; one
	// beyond is left to the poll.
	insertTxQueue = 1024
	// insertTxWatchMax is how long after its insert a transaction is
	// watched; one still open then is left to the poll.
	insertTxWatchMax = time.Minute
)

// InsertTx adds one task as Insert does, in tx, the caller's transaction on
// the engine's database: the task is the caller's to commit with its own
// rows, or to roll back. Until tx commits, no worker, editor, webhook or
// results feed sees it; a rollback leaves nothing of it, in MySQL or Redis.
// Once tx commits, the workers and long polls waiting for its category (in
// every process) are woken as by Insert, without the caller doing more than
// committing: the engine watches tx's end on a connection of its own pool
// (see DispatchConfig.InsertTxWaiters; on Galera, and past those waiters,
// the task is found by the next poll, within Dispatch.PollInterval). It
// needs New, not Start.
//
// It returns the task's id; with opts.Key set and a task holding that key
// (as tx sees it, its own inserts included), that task's id, and nothing is
// added. Bad args or opts return an error wrapping ErrInvalid, and nothing
// is written in tx. InsertTx makes one attempt: when a concurrent insert
// committed the same key first, or InnoDB picked tx as a deadlock victim, or
// a lock wait timed out, it returns an error wrapping tasks.ErrBusy, and the
// caller rolls tx back (a deadlock has already) and runs its transaction
// again; Insert retries those by itself. Round trips in tx: those of Insert,
// plus a read of the session's time zone (InsertTx sets UTC for its
// statements and puts the session's back when it differs).
func (e *Engine) InsertTx(ctx context.Context, tx Tx, args Args, opts *InsertOpts) (int64, error) {
	ids, err := e.InsertManyTx(ctx, tx, []InsertParams{{Args: args, Opts: opts}})
	if err != nil {
		return 0, err
	}
	return ids[0], nil
}

// InsertManyTx adds several tasks as InsertTx does, in tx: all of them or,
// on any error, none (the caller then rolls tx back). It returns their ids
// in the order of ps.
func (e *Engine) InsertManyTx(ctx context.Context, tx Tx, ps []InsertParams) ([]int64, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	if tx == nil {
		return nil, fmt.Errorf("taskd: insert in a transaction: %w: no transaction", ErrInvalid)
	}
	ts, err := newTasks(ps)
	if err == nil {
		err = e.checkGold(ts)
	}
	if err != nil {
		return nil, fmt.Errorf("taskd: insert in a transaction: %w", err)
	}
	ins, err := e.store.InsertIn(ctx, tx, ts)
	if err != nil {
		return nil, fmt.Errorf("taskd: %w", err)
	}
	counts := map[string]int{}
	var first int64
	for i, in := range ins {
		if in.Created {
			counts[ts[i].Category]++
			if first == 0 {
				first = in.ID
			}
		}
	}
	if first != 0 {
		e.watchCommit(ctx, first, counts)
	}
	return insertedIDs(ins), nil
}

// watchCommit has a waiter wake the categories of counts once the caller's
// transaction, which inserted task id among them, commits; unless the store
// is on Galera, or the waiters' queue is full.
func (e *Engine) watchCommit(ctx context.Context, id int64, counts map[string]int) {
	if galera, err := e.store.Galera(ctx); galera || err != nil {
		return
	}
	if !e.commits.watch(commitWatch{id: id, counts: counts, until: time.Now().Add(insertTxWatchMax)}) {
		e.log.DebugContext(ctx, "insert in a transaction left to the poll: the commit waiters are busy", "task_id", id)
	}
}

// commitWatch is a transaction of InsertManyTx to watch.
type commitWatch struct {
	id     int64          // a task the transaction inserted
	counts map[string]int // the tasks it made, by category
	until  time.Time      // the end of the watch
}

// commitWaiters watch the transactions of InsertManyTx: up to limit waiters,
// each on a connection of the store's pool, take the queued transactions in
// turn and wait for each to end, a second at a time, waking its categories
// when it committed. A waiter exists only while the queue has work.
type commitWaiters struct {
	limit int // waiters at most
	store *store.Store
	wake  func(ctx context.Context, counts map[string]int)
	log   *slog.Logger

	// life is the waiters' context: the engine's lifetime, not a caller's
	// (as http.Server's base context), ended by stop.
	life   context.Context
	cancel context.CancelFunc
	queue  chan commitWatch
	wg     sync.WaitGroup

	mu      sync.Mutex
	running int
	stopped bool
}

func newCommitWaiters(limit int, s *store.Store, wake func(context.Context, map[string]int), log *slog.Logger) *commitWaiters {
	life, cancel := context.WithCancel(context.Background())
	return &commitWaiters{limit: limit, store: s, wake: wake, log: log, life: life, cancel: cancel,
		queue: make(chan commitWatch, insertTxQueue)}
}

// watch queues c, and starts a waiter unless limit are running. It reports
// false, and queues nothing, when the queue is full or the waiters stopped.
func (w *commitWaiters) watch(c commitWatch) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return false
	}
	select {
	case w.queue <- c:
	default:
		return false
	}
	if w.running < w.limit {
		w.running++
		w.wg.Go(w.run)
	}
	return true
}

// next returns the next queued transaction, or false when there is none:
// the waiter calling it then ends.
func (w *commitWaiters) next() (commitWatch, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case c := <-w.queue:
		return c, true
	default:
		w.running--
		return commitWatch{}, false
	}
}

// requeue puts c back at the end of the queue, or drops it (to the poll)
// when the queue is full.
func (w *commitWaiters) requeue(c commitWatch) {
	select {
	case w.queue <- c:
	default:
	}
}

// run is one waiter: it takes the queued transactions until there are none.
func (w *commitWaiters) run() {
	var cw *store.CommitWaiter
	defer func() {
		if cw != nil {
			cw.Close()
		}
	}()
	for {
		c, ok := w.next()
		if !ok {
			return
		}
		if w.life.Err() != nil {
			continue // stopping: drain the queue
		}
		if cw == nil {
			var err error
			if cw, err = w.store.NewCommitWaiter(w.life); err != nil {
				if w.life.Err() == nil {
					w.log.WarnContext(w.life, "watch an insert's transaction; left to the poll", "task_id", c.id, "err", err)
				}
				continue
			}
		}
		committed, err := cw.Await(w.life, c.id)
		switch {
		case errors.Is(err, store.ErrStillOpen):
			if time.Now().Before(c.until) {
				w.requeue(c)
			}
		case err != nil:
			cw = nil // closed by Await
			if w.life.Err() == nil {
				w.log.WarnContext(w.life, "watch an insert's transaction; left to the poll", "task_id", c.id, "err", err)
			}
		case committed:
			w.wake(w.life, c.counts)
		}
	}
}

// stop ends the waiters, and returns once they have: a wait in progress is
// cut off (its connection closed), and what was queued is left to the poll.
func (w *commitWaiters) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
	w.cancel()
	w.wg.Wait()
}

// waiting returns how many transactions of InsertManyTx are queued, and how
// many waiters run.
func (w *commitWaiters) waiting() (queued, running int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queue), w.running
}
