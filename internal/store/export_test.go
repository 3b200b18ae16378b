package store

import (
	"context"
	"database/sql/driver"
	"time"

	"github.com/jmoiron/sqlx"

	"github.com/taskd/taskd/tasks"
)

// Hooks for the integration tests in package store_test.

// SetReturning makes s use (on) or not use INSERT ... RETURNING for InsertTasks, so
// both id strategies can be tested against one server.
func SetReturning(s *Store, on bool) {
	if on {
		s.returning.Store(1)
	} else {
		s.returning.Store(2)
	}
}

// CandidatesQuery exposes the candidate query builder for EXPLAIN tests.
func CandidatesQuery(cats []string, editorID int64, limit int) (string, []any) {
	return candidatesQuery(cats, editorID, limit, "", nil, nil)
}

// StageCandidatesQuery is CandidatesQuery for the tasks at one stage.
func StageCandidatesQuery(cats []string, editorID int64, limit int, stage string) (string, []any) {
	return candidatesQuery(cats, editorID, limit, stage, nil, nil)
}

// TaskResultKeysQuery exposes the query of a page's keys for EXPLAIN tests.
func TaskResultKeysQuery(ids []int64, at time.Time, taskID, fence int64, n int) (string, []any) {
	return taskResultKeysQuery(ids, resultsCursor{At: at, TaskID: taskID, Fence: fence}, n)
}

// Queries whose plans the EXPLAIN test checks.
const (
	TaskResultIDsSQL  = taskResultIDsSQL
	TaskResultKeysSQL = taskResultKeysSQL
	TaskResultRowsSQL = taskResultRowsSQL
	SendBacksSQL      = sendBacksSQL
	GroupDecisionsSQL = groupDecisionsSQL
	FreeKeysSQL       = freeKeysSQL
	ExistingKeysSQL   = existingKeysSQL

	RecycleLockSQL     = recycleLockSQL
	RecycleSQL         = recycleSQL
	LiveLeasesSQL      = liveLeasesSQL
	LiveHoldersSQL     = liveHoldersSQL
	StatsClaimsSQL     = statsClaimsSQL
	StatsByCategorySQL = statsByCategorySQL
	HeldByEditorSQL    = heldByEditorSQL
	LockEditorTaskSQL  = lockEditorTaskSQL
	TaskEventsSQL      = taskEventsSQL
)

// InTx runs fn in one of the store's transactions, with its deadlock retries.
func InTx(s *Store, ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	return s.inTx(ctx, fn)
}

// Batch runs a statement batch the way Claim and Submit do.
func Batch(s *Store, ctx context.Context, query string, args []any, scan func(*sqlx.Rows) error) error {
	return s.batch(ctx, query, args, scan)
}

// LockConflicts returns how many of s's transactions were deadlock victims or timed
// out waiting for a lock.
func LockConflicts(s *Store) int64 { return s.lockConflicts.Load() }

// ListQuery exposes the list query ListTasks would run for p, and the index it
// reads, for EXPLAIN tests.
func ListQuery(p tasks.ListParams) (query string, args []any, index string, err error) {
	limit, cur, err := checkList(&p)
	if err != nil {
		return "", nil, "", err
	}
	q := buildListQuery(p, cur, limit)
	return q.sql, q.args, q.index, nil
}

// ClaimBatchSQL, HeartbeatBatchSQL and CompleteSQL expose the worker batches'
// statement batches for EXPLAIN tests.
func ClaimBatchSQL(s *Store, ps []tasks.ClaimParams) (string, []any, error) {
	return s.claimBatchSQL(ps, nil)
}

func HeartbeatBatchSQL(s *Store, ps []tasks.HeartbeatParams) (string, []any, error) {
	return s.heartbeatBatchSQL(ps)
}

func CompleteSQL(s *Store, os []tasks.Outcome) (string, []any, error) {
	q, args, _, err := s.completeSQL(os, nil)
	return q, args, err
}

// ReplicaFallbacks returns how many reads meant for the replica the primary
// answered.
func (s *Store) ReplicaFallbacks() int64 { return s.replicaFallbacks() }

// DeliveryLog returns the attempts to deliver event eventID to webhook, oldest
// first.
func (s *Store) DeliveryLog(ctx context.Context, eventID int64, webhook string) ([]tasks.WebhookAttempt, error) {
	return s.deliveryLog(ctx, eventID, webhook)
}

// SetNodeRetry sets how long c, a Connector over several addresses, passes over
// a failed node.
func SetNodeRetry(c driver.Connector, d time.Duration) { c.(*failover).retry = d }

// AgreementQuery exposes the agreement read for EXPLAIN tests.
func AgreementQuery(field string) (string, []any) { return agreementQuery(field) }

// Working time's statements, for EXPLAIN tests.
const (
	RecordClaimTimeSQL = recordClaimTimeSQL
	WorkingTimeSQL     = workingTimeSQL
)

// Retention's reads whose plans the EXPLAIN test checks.
const (
	PurgeTasksSQL     = purgeTasksSQL
	PurgeLockTasksSQL = purgeLockTasksSQL
)
