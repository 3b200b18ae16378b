package store

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Replica defaults.
const (
	// ReplicaTimeoutDefault bounds one read from the replica when
	// Config.ReplicaTimeout is zero; the read then goes to the primary.
	ReplicaTimeoutDefault = time.Second
	// ReplicaRestDefault is how long a replica that failed a read is left
	// alone when Config.ReplicaRest is zero: reads go to the primary meanwhile.
	ReplicaRestDefault = 5 * time.Second
)

// replica is the optional read replica and its health.
type replica struct {
	db      *sqlx.DB
	timeout time.Duration
	rest    time.Duration
	// restUntil is when the replica may be tried again, in Unix nanoseconds.
	restUntil atomic.Int64
	// fallbacks counts reads the primary answered because the replica failed
	// or was resting.
	fallbacks atomic.Int64
}

// replicaFallbacks returns how many reads meant for the replica the primary
// answered because the replica failed, timed out or was resting after a
// failure. It is 0 without a replica.
func (s *Store) replicaFallbacks() int64 {
	if s.replica == nil {
		return 0
	}
	return s.replica.fallbacks.Load()
}

// read runs fn on the replica, if the store has one that is not resting and
// primary is false, and on the primary otherwise. A replica read that fails,
// or takes longer than the replica timeout, is run again on the primary, and
// the replica rests: the reads of the next ReplicaRest go to the primary. So a
// replica that is down or hung costs at most one timeout per rest period.
//
// Only reads whose answers the fence makes harmless when stale (candidates)
// or that an operator reads (stats, lists) may use it: a replica lags.
func (s *Store) read(ctx context.Context, primary bool, fn func(ctx context.Context, db *sqlx.DB) error) (onReplica bool, err error) {
	r := s.replica
	if r == nil || primary {
		return false, fn(ctx, s.db)
	}
	if time.Now().UnixNano() < r.restUntil.Load() {
		r.fallbacks.Add(1)
		return false, fn(ctx, s.db)
	}
	rctx, cancel := context.WithTimeout(ctx, r.timeout)
	err = fn(rctx, r.db)
	cancel()
	if err == nil {
		return true, nil
	}
	if ctx.Err() != nil {
		return true, err // the caller gave up; not the replica's fault
	}
	if errors.Is(err, tasks.ErrInvalid) {
		return true, err
	}
	r.restUntil.Store(time.Now().Add(r.rest).UnixNano())
	r.fallbacks.Add(1)
	return false, fn(ctx, s.db)
}
