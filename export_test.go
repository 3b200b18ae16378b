package taskd

import "github.com/jmoiron/sqlx"

// What the package's external tests look at inside an engine.

// DBForTest returns the engine's MySQL handle.
func (e *Engine) DBForTest() *sqlx.DB { return e.db }

// WaitingForTest reports whether a caller long-polls in the engine's
// dispatcher.
func (e *Engine) WaitingForTest() bool { return e.d.Stats().Waiting > 0 }

// HasDelivererForTest reports whether the engine built a webhook deliverer.
func (e *Engine) HasDelivererForTest() bool { return e.hooks != nil }

// CommitWaitersForTest returns how many transactions of InsertTx are queued
// for a commit waiter, and how many waiters run.
func (e *Engine) CommitWaitersForTest() (queued, running int) { return e.commits.waiting() }

// WaitersForTest returns how many callers long-poll in the engine's
// dispatcher (editors, and idle workers).
func (e *Engine) WaitersForTest() int { return e.d.Stats().Waiting }
