package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/textrule"
	"github.com/taskd/taskd/tasks"
)

// lookalikes are names that differ (also to the database, which ignores case
// and accents) and look alike: Cyrillic letters for Latin ones.
var lookalikes = []string{
	"paypal",
	"p\u0430ypal", "pa\u0443pal", "payp\u0430l", "\u0440aypal",
	"p\u0430\u0443pal", "p\u0430yp\u0430l", "\u0440\u0430ypal", "pa\u0443p\u0430l",
	"\u0440a\u0443pal", "\u0440a\u0443p\u0430l", "\u0440\u0430\u0443\u0440\u0430l", "p\u0430\u0443\u0440\u0430l",
}

// TestLookalikeNames: a name that looks like another editor's (the same
// confusable skeleton) is refused as a duplicate naming that editor, on
// create and on rename; an editor may be renamed to a lookalike of its own
// name; a name is kept in NFC.
func TestLookalikeNames(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	rev := b.editor(t, "rev", "news")
	ann := b.editor(t, "ann", "news")
	_, hash := tasks.NewToken()
	_, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "r\u0435v", Categories: []string{"news"}, TokenHash: hash})
	if !errors.Is(err, tasks.ErrDuplicate) || !strings.Contains(err.Error(), fmt.Sprintf(`looks like the name of editor %d, "rev"`, rev.ID)) {
		t.Errorf("create r\u0435v beside rev: %v, want ErrDuplicate naming editor %d", err, rev.ID)
	}
	lookalike := "r\u0435v"
	_, err = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Name: &lookalike})
	if !errors.Is(err, tasks.ErrDuplicate) || !strings.Contains(err.Error(), "looks like the name of editor") {
		t.Errorf("rename ann to r\u0435v: %v, want ErrDuplicate", err)
	}
	if got, _ := b.store.GetEditor(b.ctx, ann.ID); got.Name != "ann" {
		t.Errorf("ann after a refused rename: %q", got.Name)
	}
	// Renaming rev to a name that looks like its own is no clash.
	if ed, err := b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: rev.ID, Name: &lookalike}); err != nil || ed.Name != lookalike {
		t.Errorf("rename rev to r\u0435v: %+v, %v", ed, err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors`); n != 2 {
		t.Errorf("%d editors, want 2", n)
	}
	// NFC: a decomposed é is kept composed, and its skeleton is the name's.
	zoe := b.editor(t, "Zoe\u0308", "news")
	if zoe.Name != "Zoë" {
		t.Errorf("name kept as %q, want NFC %q", zoe.Name, "Zoë")
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors WHERE name = ? AND name_skeleton = ?`, "Zoë", skeletonOf("Zoë")); n != 1 {
		t.Errorf("%d editors named Zoë with its skeleton, want 1", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors WHERE name_skeleton IS NULL`); n != 0 {
		t.Errorf("%d editors without a skeleton, want 0", n)
	}
}

func skeletonOf(name string) []byte {
	s := textrule.Skeleton(name)
	return s[:]
}

// TestLookalikeNamesRace: editors created at once with names that look alike:
// exactly one is made, whatever the interleaving, and the others are refused
// as duplicates. Renames racing to lookalike names likewise.
func TestLookalikeNamesRace(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	want := textrule.Skeleton(lookalikes[0])
	for _, n := range lookalikes {
		if textrule.Skeleton(n) != want {
			t.Fatalf("%q does not look like %q to TR39", n, lookalikes[0])
		}
	}
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, len(lookalikes))
		start := make(chan struct{})
		for i, name := range lookalikes {
			wg.Go(func() {
				_, hash := tasks.NewToken()
				<-start
				_, errs[i] = b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{
					Name: fmt.Sprintf("%s%d", name, round), Categories: []string{"news"}, TokenHash: hash})
			})
		}
		close(start)
		wg.Wait()
		made := 0
		for i, err := range errs {
			switch {
			case err == nil:
				made++
			case !errors.Is(err, tasks.ErrDuplicate):
				t.Errorf("round %d, %q: %v, want ErrDuplicate", round, lookalikes[i], err)
			}
		}
		if made != 1 {
			t.Errorf("round %d: %d editors made of %d lookalike names, want 1", round, made, len(lookalikes))
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors`); n != 5 {
		t.Errorf("%d editors, want 5", n)
	}

	// Renames: each of several editors is renamed to a lookalike at once.
	var ids []int64
	for i := range lookalikes {
		ids = append(ids, b.editor(t, fmt.Sprintf("editor %d", i), "news").ID)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ids))
	start := make(chan struct{})
	for i, id := range ids {
		wg.Go(func() {
			name := lookalikes[i] + "!"
			<-start
			_, errs[i] = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: id, Name: &name})
		})
	}
	close(start)
	wg.Wait()
	renamed := 0
	for i, err := range errs {
		switch {
		case err == nil:
			renamed++
		case !errors.Is(err, tasks.ErrDuplicate):
			t.Errorf("rename to %q: %v, want ErrDuplicate", lookalikes[i], err)
		}
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors WHERE name LIKE '%!'`); renamed != 1 || n != 1 {
		t.Errorf("%d renames succeeded, %d editors renamed; want 1", renamed, n)
	}
}

// TestFillNameSkeletons: editors made before names had skeletons get theirs;
// of two whose names look alike, the older gets it and the newer none, with
// a warning naming both, and a new lookalike is refused either way.
func TestFillNameSkeletons(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	for _, name := range []string{"rev", "ann", "r\u0435v"} {
		_, hash := tasks.NewToken()
		b.exec(t, `INSERT INTO editors (name, token_hash) VALUES (?, ?)`, name, hash[:])
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	n, err := store.FillNameSkeletons(b.ctx, b.db, log)
	if err != nil || n != 2 {
		t.Fatalf("fill = %d, %v; want 2", n, err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors WHERE name = 'rev' AND name_skeleton = ?`, skeletonOf("rev")); n != 1 {
		t.Errorf("rev has no skeleton")
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors WHERE name_skeleton IS NULL`); n != 1 {
		t.Errorf("%d editors without a skeleton, want 1 (the newer lookalike)", n)
	}
	if !strings.Contains(logs.String(), "editor names look alike") || !strings.Contains(logs.String(), "editor_id=3 like_editor_id=1") {
		t.Errorf("no warning naming editors 3 and 1:\n%s", logs.String())
	}
	_, hash := tasks.NewToken()
	if _, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "kev", Categories: []string{"news"}, TokenHash: hash}); err != nil {
		t.Errorf("create a name that does not look alike: %v", err)
	}
	_, hash = tasks.NewToken()
	if _, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "re\u0475", Categories: []string{"news"}, TokenHash: hash}); !errors.Is(err, tasks.ErrDuplicate) {
		t.Errorf("create a third lookalike of rev: %v, want ErrDuplicate", err)
	}
	if n, err := store.FillNameSkeletons(b.ctx, b.db, log); err != nil || n != 0 {
		t.Errorf("fill again = %d, %v; want 0", n, err)
	}
}

// TestStageLimitsNeedStages: stage limits for a category without stages are
// refused, on create and on update, and change nothing.
func TestStageLimitsNeedStages(t *testing.T) {
	t.Parallel()
	b := workflowSetup(t)
	ann := b.editor(t, "ann", "desk", "news")
	_, hash := tasks.NewToken()
	_, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "bob", Categories: []string{"desk", "news"}, TokenHash: hash,
		Stages: map[string][]string{"news": {"review"}}})
	if !errors.Is(err, tasks.ErrInvalid) || !strings.Contains(err.Error(), `category "news" has no stages`) {
		t.Errorf("create with stages of news: %v, want ErrInvalid saying news has no stages", err)
	}
	_, err = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Stages: map[string][]string{"desk": {"review"}, "news": {"edit"}}})
	if !errors.Is(err, tasks.ErrInvalid) || !strings.Contains(err.Error(), `category "news" has no stages`) {
		t.Errorf("update with stages of news: %v, want ErrInvalid saying news has no stages", err)
	}
	if got, _ := b.store.GetEditor(b.ctx, ann.ID); got.Stages != nil {
		t.Errorf("ann's stages after a refused update: %v", got.Stages)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors`); n != 1 {
		t.Errorf("%d editors, want 1", n)
	}
	if ed, err := b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Stages: map[string][]string{"desk": {"review"}}}); err != nil || len(ed.Stages) != 1 {
		t.Errorf("stages of desk: %+v, %v", ed, err)
	}
}

// TestGaleraLookalikeNamesAcrossNodes: on a Galera cluster, lookalike names
// created on all three nodes at once make one editor: the skeleton's unique
// key is certified across nodes.
func TestGaleraLookalikeNamesAcrossNodes(t *testing.T) {
	g := storetest.NewGalera(t)
	var stores []*store.Store
	for _, db := range g.Nodes {
		s, err := store.New(db, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		askGalera(t, s)
		stores = append(stores, s)
	}
	for round := range 5 {
		var wg sync.WaitGroup
		errs := make([]error, len(lookalikes))
		start := make(chan struct{})
		for i, name := range lookalikes {
			wg.Go(func() {
				_, hash := tasks.NewToken()
				<-start
				_, errs[i] = stores[i%len(stores)].CreateEditor(t.Context(), tasks.CreateEditorParams{
					Name: fmt.Sprintf("%s%d", name, round), Categories: []string{"news"}, TokenHash: hash})
			})
		}
		close(start)
		wg.Wait()
		made := 0
		for i, err := range errs {
			switch {
			case err == nil:
				made++
			case !errors.Is(err, tasks.ErrDuplicate):
				t.Errorf("round %d, %q on node %d: %v, want ErrDuplicate", round, lookalikes[i], i%len(stores)+1, err)
			}
		}
		if made != 1 {
			t.Errorf("round %d: %d editors made of %d lookalike names on %d nodes, want 1", round, made, len(lookalikes), len(stores))
		}
	}
}
