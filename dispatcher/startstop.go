package dispatcher

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

// startStop is the state machine the Dispatcher, the Sweeper and the Worker
// share: new, then started by one Start, then stopped for good by Stop.
// Stop before Start only makes Start refuse.
type startStop struct {
	mu      sync.Mutex
	started bool // Start ran
	stopped bool // Stop ran
}

// start runs begin and marks the service started, unless it was started or
// stopped before; the error names the service. begin runs under the lock, so
// a concurrent stop sees everything it set.
func (s *startStop) start(name string, begin func()) error {
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

// stop marks the service stopped and reports whether Start ran, in which
// case the caller has something to stop (every call after a Start reports
// true, so that each Stop waits for the same drain).
func (s *startStop) stop() (started bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	return s.started
}
