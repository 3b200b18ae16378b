package taskd_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
)

// TestEngineInstructionsFromConfig: Start makes a category's configured
// instructions a new version only when the text differs from the current one;
// instructions_file is read as the text.
func TestEngineInstructionsFromConfig(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := storetest.NewDB(t)
	file := filepath.Join(t.TempDir(), "news.md")
	if err := os.WriteFile(file, []byte("# News\n\nCheck every name."), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func(cc taskd.CategoryConfig) {
		t.Helper()
		e := newEngine(t, taskd.Config{Categories: []taskd.CategoryConfig{cc}}, taskd.WithDB(db))
		if err := e.Start(ctx); err != nil {
			t.Fatalf("start: %v", err)
		}
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, err := store.New(db, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	current := func() (int, string, string) {
		t.Helper()
		in, err := s.Instructions(ctx, "news", 0)
		if err != nil {
			t.Fatalf("current instructions: %v", err)
		}
		return in.Version, in.Body, in.Source
	}
	start(taskd.CategoryConfig{Name: "news", Instructions: "Be brief."})
	if v, body, src := current(); v != 1 || body != "Be brief." || src != "config" {
		t.Fatalf("after the first start: version %d %q from %s", v, body, src)
	}
	start(taskd.CategoryConfig{Name: "news", Instructions: "Be brief."})
	if v, _, _ := current(); v != 1 {
		t.Errorf("a start with the same text made version %d", v)
	}
	start(taskd.CategoryConfig{Name: "news", InstructionsFile: file})
	if v, body, _ := current(); v != 2 || body != "# News\n\nCheck every name." {
		t.Errorf("after a start with the file: version %d %q, want version 2 with the file's text", v, body)
	}
	start(taskd.CategoryConfig{Name: "news"})
	if v, _, _ := current(); v != 2 {
		t.Errorf("a start without instructions made version %d", v)
	}
	e := newEngine(t, taskd.Config{Categories: []taskd.CategoryConfig{{Name: "news", InstructionsFile: file + ".missing"}}}, taskd.WithDB(db))
	if err := e.Start(ctx); err == nil {
		t.Error("start with a missing instructions_file: no error")
	}
}
