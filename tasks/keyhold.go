package tasks

import (
	"fmt"
	"time"
)

// KeyHold says how long a task holds its key: while it is held, inserting a task
// with the same key returns the holder instead (idempotent inserts); once it is free,
// such an insert makes a new task, and several tasks then share the key over time.
// It is one of:
//
//   - KeyHoldForever (or empty, the default): as long as the task's row is kept,
//     whatever its status, until retention deletes the ended task;
//   - KeyHoldLive: only while the task is pending or assigned: the statement that
//     ends it (done, dead or cancelled) frees the key;
//   - a duration (KeyHoldFor, in time.ParseDuration's form, whole seconds from 1s
//     to MaxKeyHold, such as "24h"): while the task is pending or assigned and for
//     that long after it ended. The sweeper frees such keys within a sweep of the
//     period's end.
//
// A task deleted by retention frees its key at once, whatever its hold. Requeueing a
// dead task takes its key again, and fails with ErrDuplicate if another task has
// taken it meanwhile.
type KeyHold string

const (
	// KeyHoldForever holds the key as long as the task's row is kept.
	KeyHoldForever KeyHold = "forever"
	// KeyHoldLive holds the key only while the task is pending or assigned.
	KeyHoldLive KeyHold = "live"
	// MaxKeyHold is the longest period a key may be held after its task ended.
	MaxKeyHold = 10 * 365 * 24 * time.Hour
)

// KeyHoldFor is the KeyHold of a key held for d after its task ended.
func KeyHoldFor(d time.Duration) KeyHold { return KeyHold(d.String()) }

// Period returns the period h holds a key after its task ended, and whether it
// holds it forever (KeyHoldForever or empty): 0 and false for KeyHoldLive. An
// unknown value or a period that is not whole seconds from 1s to MaxKeyHold
// returns an error wrapping ErrInvalid.
func (h KeyHold) Period() (period time.Duration, forever bool, err error) {
	switch h {
	case "", KeyHoldForever:
		return 0, true, nil
	case KeyHoldLive:
		return 0, false, nil
	}
	d, err := time.ParseDuration(string(h))
	if err != nil || d < time.Second || d > MaxKeyHold || d%time.Second != 0 {
		return 0, false, fmt.Errorf("%w: key_hold must be %q, %q or a duration of whole seconds from 1s to %s such as 24h, got %q",
			ErrInvalid, KeyHoldForever, KeyHoldLive, MaxKeyHold, h)
	}
	return d, false, nil
}
