package store

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Hooks for the group commit tests in package store_test.

// GroupCounts are what a store's committer counted.
type GroupCounts struct {
	// Sent is the groups sent (a split sends two more), Committed those that
	// committed, Led the writes that went at once and Waited those that
	// waited for a group in flight.
	Sent, Committed, Led, Waited int64
}

// GroupCountsOf returns s's committer's counts; zero without a committer.
func GroupCountsOf(s *Store) GroupCounts {
	g := s.group
	if g == nil {
		return GroupCounts{}
	}
	return GroupCounts{Sent: g.sent.Load(), Committed: g.committed.Load(), Led: g.led.Load(), Waited: g.waited.Load()}
}

// GroupQueued returns how many writes wait for a group.
func GroupQueued(s *Store) int { return s.group.queued() }

// BeforeGroup makes fn run before each group is sent, in the group's
// goroutine, with its number of members. Set it before any write.
func BeforeGroup(s *Store, fn func(n int)) { s.group.beforeSend = fn }

// SetGroupFlights sets how many groups s may have in flight at once. Set it
// before any write.
func SetGroupFlights(s *Store, n int) { s.group.flights = n }

// CycleSQL exposes the transaction a group of the given cycles sends: for each
// i, submits[i] when not nil, claims[i] when not nil, or both (a submit with
// the next claim); then the heartbeats. Leases must be valid.
func CycleSQL(s *Store, submits []*tasks.SubmitParams, claims []*tasks.ClaimParams, beats []*tasks.HeartbeatParams) (string, []any) {
	var ms []*member
	for _, b := range beats {
		ms = append(ms, &member{cycle: &cycle{beat: b, lease: b.Lease}})
	}
	for i := range max(len(submits), len(claims)) {
		c := &cycle{}
		if i < len(submits) {
			c.submit = submits[i]
		}
		if i < len(claims) && claims[i] != nil {
			c.claim, c.lease = claims[i], claims[i].Lease
		}
		ms = append(ms, &member{cycle: c})
	}
	q, args, _ := s.groupSQL(ms)
	return q, args
}

// RunBatch runs query as a batch of s whose answer must hold scans result
// sets, each read to its end.
func RunBatch(ctx context.Context, s *Store, query string, args []any, scans int) error {
	fs := make([]func(*sqlx.Rows) error, scans)
	for i := range fs {
		fs[i] = func(rows *sqlx.Rows) error {
			for rows.Next() {
			}
			return rows.Err()
		}
	}
	return s.batch(ctx, query, args, scanEach(fs))
}

// ActAsGalera makes s write as it does on a Galera node.
func ActAsGalera(s *Store) { s.galera.Store(galeraOn) }
