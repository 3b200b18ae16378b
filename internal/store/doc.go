// Package store is taskd's MySQL store: it reads and writes the domain types of
// package tasks (tasks, claims, editors, results, events, webhook deliveries). It
// knows nothing about Redis: the store is the fencing authority, and every write
// about a claim is a conditional UPDATE on (id, fence, status) that must match
// exactly one row. The tables it works on (schema.sql) are made and kept up to
// date by package internal/store/migrate.
//
// # Opening
//
// Open connects to MySQL or MariaDB with the session settings the fencing rules
// need (OpenDB does the same for a *sql.DB made elsewhere, Connector for a
// driver.Connector); New returns a Store on that handle, with a Config whose zero
// fields take their defaults. Writes made through a Store skip the engine's Redis
// locks and wake-ups: outside this module, write through the engine.
//
// # The claim lifecycle
//
// Candidates lists claimable tasks for a set of categories; Claim takes one of them in a
// single conditional UPDATE that bumps the task's fence; the holder then calls Heartbeat
// to extend the lease (up to Config.MaxHold) and ends the claim with Submit, Release or
// Fail. A claim whose lease has passed is dead: the holder's writes are refused with
// ErrStale, the next Claim may take the task over at once, and RecycleExpired returns
// such tasks to the pool in batches. ForceRelease revokes a claim for an operator.
//
// # Batches
//
// The hot writes are one transaction sent as one statement batch, one round trip:
// SubmitAndClaim is an editor's cycle, a submit and the claim of its next task. For
// workers, ClaimBatch claims many tasks, Complete records many outcomes (done, retry,
// dead) and HeartbeatBatch renews many leases, each with one commit. Every member is
// fenced on its own: a stale member changes nothing while the others commit, and the
// answer says what happened to each.
//
// # Inserting and listing
//
// Insert adds tasks; a task with a Key that exists is not added again, and the answer
// says which were made, so retried inserts and imports are safe. RunAfter holds a task
// back and DueAt orders it within its priority. ListTasks pages through the pool by
// filter with keyset cursors, reading one index per page (EXPLAIN.md).
//
// # An operator's actions
//
// Requeue puts a dead task back in the pool with its attempts reset; Cancel ends a
// pending or assigned task for good (StatusCancelled), and the claim of an assigned
// one, whose holder's writes are refused from then on with ErrCancelled;
// RequeueMatching and CancelMatching (pending and assigned tasks) do the same by
// filter, a bounded number per call. PauseCategory stops every claim of a
// category's tasks, checked in the claim statements themselves, until ResumeCategory.
//
// # Results feed
//
// Results reads the accepted results after a cursor, numbering the newly committed
// ones as it goes, so that a reader that follows the cursor reads each result exactly
// once, whatever order submits commit in (results.go gives the argument); CountResults
// counts what a reader has yet to read.
//
// # Audit trail
//
// Every write about a claim appends events to the task's audit trail (TaskEvents
// reads it) in the same transaction. Each event keeps the trace id of the sampled
// span in the ctx of the call that wrote it (a claim's, a submit's, a release's, a
// sweep's), read with trace.SpanContextFromContext: in a group commit each member's
// own, in a worker batch the batch's. Without a sampled span the event has none, and
// nothing more is sent.
//
// # Time
//
// Every time that decides a lease (assigned_at, lease_expires_at, run_after, skip
// deadlines) comes from the database clock, NOW(3), never from the Go clock, so
// dispatchers on different machines agree on who holds what.
//
// # Errors
//
// Methods return errors wrapped with the operation; test them with errors.Is against
// the sentinels of package tasks: tasks.ErrNotFound, ErrStale, ErrHoldLimit,
// ErrEditorBusy, ErrInvalid, ErrDuplicate, ErrBusy, ErrPaused and ErrWrongStatus.
// Unreachable tells an error of the connection from a refusal.
package store
