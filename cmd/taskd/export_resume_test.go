package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
)

// TestExportResumesAfterInterrupt exports 100,000 results, interrupts the
// export with SIGINT halfway, and resumes it from the cursor it printed: the
// file must then hold each result exactly once.
//
// To interrupt it at a known point, without timing luck, the first half of
// the results is seeded as already numbered, and the test holds the lock of
// the feed's counter: the export writes the first 50,000 and then waits to
// number the rest. Once the file has them, the test sends SIGINT.
func TestExportResumesAfterInterrupt(t *testing.T) {
	t.Parallel()
	taskdBin(t) // built before the clock starts
	began := time.Now()
	env := servicesEnv(t)
	dsn := strings.TrimPrefix(env[0], "TASKD_MYSQL_DSN=")
	db, err := store.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	const total, half = 100_000, 50_000
	seedResults(t, db, 0, total, half)
	seeded := time.Since(began)

	hold, err := db.BeginTxx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Rollback() }()
	if _, err := hold.ExecContext(t.Context(), `SELECT last_seq FROM task_results_feed WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "results.jsonl")
	first := time.Now()
	p := start(t, env, "export", "-o", out)
	testenv.Eventually(t, 90*time.Second, fmt.Sprintf("the export writes %d results", half), func() bool {
		select {
		case <-p.done:
			t.Fatalf("export exited (%v) before writing %d results:\n%s", p.err, half, p.stderr.String())
		default:
		}
		return lines(t, out) >= half
	})
	firstTook := time.Since(first)
	if code := p.stop(syscall.SIGINT, 30*time.Second); code != exitFailure {
		t.Fatalf("interrupted export: exit %d, want %d:\n%s", code, exitFailure, p.stderr.String())
	}
	stderr := p.stderr.String()
	cursor := lastCursor(t, stderr)
	if !strings.Contains(stderr, "interrupted") || cursor != half {
		t.Fatalf("interrupted export printed cursor %d, want %d:\n%s", cursor, half, stderr)
	}
	if n := lines(t, out); n != half {
		t.Fatalf("the interrupted export left %d results, want %d", n, half)
	}
	if err := hold.Rollback(); err != nil {
		t.Fatal(err)
	}

	second := time.Now()
	_, stderr, code := run(t, env, "export", "-o", out, "-append", "-after", strconv.FormatInt(cursor, 10))
	secondTook := time.Since(second)
	if code != exitOK || lastCursor(t, stderr) != total {
		t.Fatalf("resumed export: exit %d:\n%s", code, stderr)
	}
	wantEvery(t, readExport(t, readFile(t, out)), total)
	t.Logf("100,000 results: seeded in %v; first %d (already numbered) exported in %v (%.0f results/s, from process start); "+
		"the other %d numbered and exported in %v (%.0f results/s, from process start); whole test %v",
		seeded.Round(time.Millisecond), half, firstTook.Round(time.Millisecond), half/firstTook.Seconds(),
		total-half, secondTook.Round(time.Millisecond), (total-half)/secondTook.Seconds(), time.Since(began).Round(time.Millisecond))
}

// lines counts the newlines in the file at path (0 when it does not exist yet).
func lines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(data, []byte{'\n'})
}
