package testenv

import (
	"testing"
	"time"
)

// eventuallyPoll is how often Eventually checks its condition.
const eventuallyPoll = 5 * time.Millisecond

// Eventually checks cond every few milliseconds until it holds, and fails
// the test, naming what, when it still does not after within. It is for
// conditions no signal reports (rows in a database, a counter); wait on a
// channel where there is one.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(eventuallyPoll)
	}
}
