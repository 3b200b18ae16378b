package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jmoiron/sqlx"
)

// Group commit. The claimant's hot writes (a claim of a pending task, a submit, a
// submit with the next claim, a heartbeat) are guarded by the state of the rows,
// and their refusals are answers of a SELECT, not errors. The writes of different
// claimants can therefore share one transaction: each sees the rows as the ones
// before it left them, as it would have in a transaction of its own committed
// after theirs. A committer sends them so: while its groups are in flight
// (groupFlights at most), the writes that arrive wait, and the next group takes
// all of them (up to Config.GroupCommit) in one round trip and one commit. A write
// that finds a flight free goes at once, as a group of one: there is no timer, and
// a lone claimant waits for nobody.
//
// A group writes its cycles (claims, submits, heartbeats: see Cycles, in
// cycle.go) with set-based statements, one per kind of write for all of them.
// Every round only reads user variables (@taskd_*) it set first, so a round
// never sees a value a round before it left. Each round knows how many result
// sets its SELECTs answer, which is how the group's answer is split among them.
//
// A statement error in a group (a value the server refuses, a deadlock, a lock wait
// timeout) rolls the whole group back; its members are then sent again in halves,
// down to single members, which retry deadlocks as batch does: one member's bad
// statement fails that member alone. An error that is not the server's (a broken
// connection) is every member's answer, as it would have been alone.

// GroupCommitDefault is Config.GroupCommit's default.
const GroupCommitDefault = 64

// GroupCommitMax is the largest Config.GroupCommit.
const GroupCommitMax = 1000

// groupFlights is how many groups may be in flight at once, each on a
// connection of its own: one group runs its members' statements one after the
// other on one server thread, so a second lets the server use a second core
// while the first is on its way.
const groupFlights = 2

// groupTimeout bounds the time a group spends on the server, retries and splits
// included. A group runs on a context of its own (see groupContext), which ends
// sooner once none of its members waits for it.
const groupTimeout = 30 * time.Second

// groupLeftGrace is how long a group may still run once every member has left
// (see groupContext): ample for a server that answers to finish it, so that a
// member who left while its group was on its way usually finds its write made,
// and far less than groupTimeout for one that stopped answering.
const groupLeftGrace = 2 * time.Second

// member is one claimant's write in a group.
type member struct {
	ctx context.Context
	// cycle is the member's write; its answer is scanned into it, set, not
	// accumulated, so that a member sent again is scanned again.
	cycle *cycle
	// err is the member's answer, set before done is closed.
	err  error
	done chan struct{}
}

// committer sends members in groups; see Group commit above.
type committer struct {
	s   *Store
	max int

	mu sync.Mutex
	// queue holds the members waiting for the group in flight to end.
	queue []*member
	// flying is the number of groups in flight; their goroutines take the
	// queue next. At most flights are.
	flying, flights int

	// Counts, for tests: groups sent (splits count as groups), groups that
	// committed, members that went at once and members that waited.
	sent, committed, led, waited atomic.Int64
	// beforeSend, when set (tests only), runs before each group is sent, in
	// the group's goroutine, with the number of its members.
	beforeSend func(n int)
}

// groupedCycle writes c in a transaction with the writes of other claimants that
// arrive together (see join), its events with the trace id of ctx's span, and
// sets c's answer.
func (s *Store) groupedCycle(ctx context.Context, c *cycle) error {
	c.trace = traceOf(ctx)
	return s.join(ctx, &member{cycle: c})
}

// join runs m's write in a transaction, with those of other members that arrive
// together, and returns m's answer once its part committed. When ctx ends first it
// returns ctx's cause at once: m's part may still commit, as a batch whose client
// went away may (every write is fenced, so a retry of it is refused, never applied
// twice). A member whose ctx ended before its group was sent is left out of it.
func (s *Store) join(ctx context.Context, m *member) error {
	s.onGalera(ctx) // known, before groupSQL asks
	if s.group == nil {
		query, args, scans := s.groupSQL([]*member{m})
		return s.batch(ctx, query, args, scanEach(scans))
	}
	if err := ctx.Err(); err != nil {
		return context.Cause(ctx)
	}
	m.ctx, m.done = ctx, make(chan struct{})
	s.group.add(m)
	select {
	case <-m.done:
		return m.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// groupSQL is the transaction of ms, with its arguments and the scans of its
// result sets: the rounds of their cycles.
func (s *Store) groupSQL(ms []*member) (string, []any, []func(*sqlx.Rows) error) {
	var q strings.Builder
	var args []any
	var scans []func(*sqlx.Rows) error
	q.WriteString("START TRANSACTION;\n")
	cs := make([]*cycle, len(ms))
	for i, m := range ms {
		cs[i] = m.cycle
	}
	for _, r := range rounds(cs) {
		a, scan := s.roundSQL(&q, r)
		args = append(args, a...)
		scans = append(scans, scan)
	}
	q.WriteString("COMMIT")
	return q.String(), args, scans
}

// add queues m, and sends a group at once if fewer than flights are in flight.
func (g *committer) add(m *member) {
	g.mu.Lock()
	g.queue = append(g.queue, m)
	if g.flying >= g.flights {
		g.mu.Unlock()
		g.waited.Add(1)
		return
	}
	g.flying++
	ms := g.takeLocked()
	g.mu.Unlock()
	g.led.Add(1)
	go g.fly(ms)
}

// fly sends ms, then the members that queued meanwhile, until none are left.
// It answers the members of a group once it knows what it sends next, so that a
// member who writes again at once finds no flight it has to wait for.
func (g *committer) fly(ms []*member) {
	for {
		if len(ms) > 0 {
			ctx, cancel := groupContext(ms)
			g.send(ctx, ms)
			cancel()
		}
		g.mu.Lock()
		next := g.takeLocked()
		if len(next) == 0 {
			g.flying--
		}
		g.mu.Unlock()
		for _, m := range ms {
			close(m.done)
		}
		if len(next) == 0 {
			return
		}
		ms = next
	}
}

// groupContext returns the context a group of ms (at least one) runs on. It
// carries the first member's values (its trace span, which the group's
// statements are recorded under), not its end: a member who leaves does not take
// the others' writes with it. It ends after groupTimeout, or groupLeftGrace after
// every member's context has ended: a group nobody waits for any more (each
// member answered, say, 503 while the server did not answer) frees its flight and
// its connection for the writes queued behind it, which would otherwise wait out
// groupTimeout though another node, or the same one again, could take them.
func groupContext(ms []*member) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ms[0].ctx), groupTimeout)
	var left atomic.Int64
	left.Store(int64(len(ms)))
	stops := make([]func() bool, len(ms))
	for i, m := range ms {
		stops[i] = context.AfterFunc(m.ctx, func() {
			if left.Add(-1) == 0 {
				time.AfterFunc(groupLeftGrace, cancel)
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// takeLocked takes up to max members from the queue, leaving out those whose
// context ended (they have had their answer).
func (g *committer) takeLocked() []*member {
	var ms []*member
	n := 0
	for _, m := range g.queue {
		n++
		if m.ctx.Err() == nil {
			ms = append(ms, m)
			if len(ms) == g.max {
				break
			}
		}
	}
	g.queue = append(g.queue[:0], g.queue[n:]...)
	return ms
}

// queued is the number of members waiting for a group.
func (g *committer) queued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.queue)
}

// send runs ms as one transaction and answers each member: splitting on a
// statement error, as Group commit describes.
func (g *committer) send(ctx context.Context, ms []*member) {
	if g.beforeSend != nil {
		g.beforeSend(len(ms))
	}
	g.sent.Add(1)
	query, args, scans := g.s.groupSQL(ms)
	if len(ms) == 1 {
		err := g.s.batch(ctx, query, args, scanEach(scans))
		if err == nil {
			g.committed.Add(1)
		}
		answer(ms, err)
		return
	}
	err := g.s.batchOnce(ctx, query, args, scanEach(scans))
	var me *mysql.MySQLError
	switch {
	case err == nil:
		g.committed.Add(1)
		answer(ms, nil)
	case errors.As(err, &me) && ctx.Err() == nil:
		if mysqlErrorIs(err, erLockDeadlock, erLockWaitTimeout) {
			g.s.lockConflicts.Add(1)
		}
		half := len(ms) / 2
		g.send(ctx, ms[:half])
		g.send(ctx, ms[half:])
	default:
		answer(ms, err)
	}
}

// answer gives each of ms err as its answer, which fly hands over.
func answer(ms []*member, err error) {
	for _, m := range ms {
		m.err = err
	}
}

// scanEach returns a scan for batch that hands each result set of the answer
// to the next of scans, and fails if the answer has fewer.
func scanEach(scans []func(*sqlx.Rows) error) func(*sqlx.Rows) error {
	return func(rows *sqlx.Rows) error {
		for i, scan := range scans {
			if i > 0 && !rows.NextResultSet() {
				if err := rows.Err(); err != nil {
					return err
				}
				return fmt.Errorf("%w: result set %d of %d", errShortAnswer, i+1, len(scans))
			}
			// A Rows of its own: sqlx maps a result's columns to fields once.
			if err := scan(&sqlx.Rows{Rows: rows.Rows, Mapper: rows.Mapper}); err != nil {
				return err
			}
		}
		return nil
	}
}
