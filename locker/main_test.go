package locker_test

import (
	"os"
	"testing"

	"github.com/taskd/taskd/internal/testenv"
)

func TestMain(m *testing.M) {
	testenv.QuietRedis()
	os.Exit(m.Run())
}
