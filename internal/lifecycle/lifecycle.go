// Package lifecycle is the start-and-stop state machine that the
// dispatcher's relay and each background loop (the sweeper, the scheduler,
// the workers, the webhook delivery, the activity history) share: new, then
// started by one Start, then stopped for good by Stop.
package lifecycle

import (
	"errors"
	"fmt"
	"sync"
)

var (
	// ErrStarted is returned (wrapped) by Start on a service that is already
	// running.
	ErrStarted = errors.New("already started")

	// ErrStopped is returned (wrapped) by Start after Stop: a stopped service
	// does not start again; build a new one.
	ErrStopped = errors.New("stopped")
)

// State is the state of one service. Stop before Start only makes Start
// refuse. The zero value is a new service.
type State struct {
	mu      sync.Mutex
	started bool // Start ran
	stopped bool // Stop ran
}

// Start runs begin and marks the service started, unless it was started or
// stopped before: the error then wraps ErrStarted or ErrStopped and names
// the service. begin runs under the lock, so a concurrent Stop sees
// everything it set.
func (s *State) Start(name string, begin func()) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopped:
		return fmt.Errorf("start %s: %w", name, ErrStopped)
	case s.started:
		return fmt.Errorf("start %s: %w", name, ErrStarted)
	}
	begin()
	s.started = true
	return nil
}

// Stop marks the service stopped and reports whether Start ran, in which
// case the caller has something to stop (every call after a Start reports
// true, so that each Stop waits for the same drain).
func (s *State) Stop() (started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	return s.started
}
