package delivery_test

import (
	"os"
	"testing"

	"github.com/taskd/taskd/internal/dispatchtest"
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
