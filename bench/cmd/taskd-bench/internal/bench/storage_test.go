package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestJSONOfSize(t *testing.T) {
	t.Parallel()
	for _, size := range StorageSizes {
		a, b := jsonOfSize(1, size), jsonOfSize(2, size)
		if !json.Valid(a) {
			t.Fatalf("size %d: invalid JSON %.40s", size, a)
		}
		if size > 100 && len(a) != size {
			t.Errorf("size %d: %d bytes", size, len(a))
		}
		if size == 0 && len(a) > 16 {
			t.Errorf("tiny payload of %d bytes: %s", len(a), a)
		}
		if bytes.Equal(a, b) {
			t.Errorf("size %d: two seeds give the same text", size)
		}
	}
}

func TestStorageFigure(t *testing.T) {
	t.Parallel()
	f := StorageFigure{PayloadBytes: 1024, Tasks: 1000,
		Before: []TableFigure{{Name: "tasks", Rows: 0, Bytes: 1 << 20}, {Name: "task_results", Bytes: 0}},
		After:  []TableFigure{{Name: "tasks", Rows: 1000, Bytes: 3 << 20}, {Name: "task_results", Rows: 1000, Bytes: 1 << 20}}}
	if got, want := f.BytesPerTask(), float64(3<<20)/1000; got != want {
		t.Errorf("bytes per task = %v, want %v", got, want)
	}
	var out strings.Builder
	WriteStorage(&out, []StorageFigure{f})
	for _, want := range []string{"payload and result of 1024 B", "3146 bytes per task", "tasks +1000 rows 2.0 MiB (2097 B/task)", "task_results +1000 rows 1.0 MiB"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
}
