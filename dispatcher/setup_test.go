package dispatcher_test

import (
	"context"
	"os"
	"testing"

	"github.com/taskd/taskd/internal/dispatchtest"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.QuietRedis()
	os.Exit(m.Run())
}

// bundle is what a test works with: its own database and its own Redis key
// prefix, so tests run in parallel (see dispatchtest).
type bundle struct{ *dispatchtest.Bundle }

type setupOpts = dispatchtest.Options

func setup(t testing.TB, opts ...setupOpts) *bundle {
	t.Helper()
	return &bundle{dispatchtest.New(t, opts...)}
}

// sweepOnce runs one sweep of the bundle's claims, scanning its Redis for
// orphan locks, and fails the test on error.
func (b *bundle) sweepOnce(t testing.TB) sweeper.Result {
	t.Helper()
	s, err := sweeper.New(b.D, sweeper.Config{Store: b.Store, Locks: b.Locks, Redis: b.RDB})
	if err != nil {
		t.Fatalf("new sweeper: %v", err)
	}
	res, err := s.Sweep(context.Background())
	if err != nil {
		t.Fatalf("sweep: %v", err)
	}
	return res
}
