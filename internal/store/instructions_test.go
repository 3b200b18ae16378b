package store_test

import (
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestInstructionsVersions(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	if _, err := b.store.Instructions(b.ctx, "news", 0); !errors.Is(err, tasks.ErrNotFound) {
		t.Fatalf("instructions of a category without any: %v, want ErrNotFound", err)
	}
	v1, created, err := b.store.SetInstructions(b.ctx, "news", "# Rules\nBe *kind*.", tasks.InstructionsFromConfig)
	if err != nil || !created || v1.Version != 1 || v1.Source != "config" || v1.CreatedAt.IsZero() {
		t.Fatalf("set = %+v, %v, %v; want version 1 made from config", v1, created, err)
	}
	same, created, err := b.store.SetInstructions(b.ctx, "news", "# Rules\nBe *kind*.", tasks.InstructionsFromConfig)
	if err != nil || created || same.Version != 1 {
		t.Errorf("set the same text = %+v, %v, %v; want version 1 kept, nothing made", same, created, err)
	}
	v2, created, err := b.store.SetInstructions(b.ctx, "news", "Be brief.", tasks.InstructionsFromAPI)
	if err != nil || !created || v2.Version != 2 || v2.Source != "api" {
		t.Fatalf("set new text = %+v, %v, %v; want version 2 from the API", v2, created, err)
	}
	cur, err := b.store.Instructions(b.ctx, "news", 0)
	if err != nil || cur.Version != 2 || cur.Body != "Be brief." {
		t.Errorf("current = %+v, %v; want version 2", cur, err)
	}
	old, err := b.store.Instructions(b.ctx, "news", 1)
	if err != nil || old.Body != "# Rules\nBe *kind*." {
		t.Errorf("version 1 = %+v, %v; want its text kept", old, err)
	}
	if _, err := b.store.Instructions(b.ctx, "news", 3); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("version 3: %v, want ErrNotFound", err)
	}
	list, err := b.store.InstructionVersions(b.ctx, "news")
	if err != nil || len(list) != 2 || list[0].Version != 2 || list[1].Version != 1 || list[0].Body != "" {
		t.Errorf("versions = %+v, %v; want 2 then 1, without text", list, err)
	}
	latest, err := b.store.LatestInstructions(b.ctx)
	if err != nil || len(latest) != 1 || latest["news"] != 2 {
		t.Errorf("latest = %v, %v; want news: 2", latest, err)
	}
	for _, bad := range []struct{ category, body, source string }{
		{"", "x", "api"},
		{"news", strings.Repeat("x", tasks.MaxInstructionsBytes+1), "api"},
		{"news", "bad \xff", "api"},
		{"news", "x", "console"},
	} {
		if _, _, err := b.store.SetInstructions(b.ctx, bad.category, bad.body, bad.source); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("set %q (%d bytes) from %q: %v, want ErrInvalid", bad.category, len(bad.body), bad.source, err)
		}
	}
	if cur, _ := b.store.Instructions(b.ctx, "news", 0); cur == nil || cur.Version != 2 {
		t.Errorf("after refused sets: current %+v, want version 2 still", cur)
	}
}

// TestInstructionsConcurrentFirstVersions: texts set at once each get their
// own version, numbered without a gap or a repeat.
func TestInstructionsConcurrentFirstVersions(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = b.store.SetInstructions(b.ctx, "sport", strings.Repeat("v", i+1), tasks.InstructionsFromAPI)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("set %d: %v", i, err)
		}
	}
	list, err := b.store.InstructionVersions(b.ctx, "sport")
	if err != nil || len(list) != n {
		t.Fatalf("versions = %d, %v; want %d", len(list), err, n)
	}
	for i, v := range list {
		if v.Version != n-i {
			t.Errorf("version %d at %d, want %d", v.Version, i, n-i)
		}
	}
}

func TestInstructionsConfirmations(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	_, hash := tasks.NewToken()
	ed, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "ann", Categories: []string{"news", "sport", "arts"}, TokenHash: hash})
	if err != nil {
		t.Fatal(err)
	}
	cats := []string{"arts", "news", "sport"}
	if _, _, err := b.store.SetInstructions(b.ctx, "news", "Be kind.", tasks.InstructionsFromAPI); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.store.SetInstructions(b.ctx, "sport", "", tasks.InstructionsFromAPI); err != nil {
		t.Fatal(err)
	}
	un, err := b.store.UnconfirmedInstructions(b.ctx, ed.ID, cats)
	if err != nil || len(un) != 1 || un[0] != "news" {
		t.Fatalf("unconfirmed = %q, %v; want news (sport's are empty, arts has none)", un, err)
	}
	if err := b.store.ConfirmInstructions(b.ctx, ed.ID, "news", 2); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("confirm a version that does not exist: %v, want ErrNotFound", err)
	}
	if err := b.store.ConfirmInstructions(b.ctx, ed.ID+1000, "news", 1); !errors.Is(err, tasks.ErrNotFound) {
		t.Errorf("confirm for an editor that does not exist: %v, want ErrNotFound", err)
	}
	for range 2 {
		if err := b.store.ConfirmInstructions(b.ctx, ed.ID, "news", 1); err != nil {
			t.Fatalf("confirm: %v", err)
		}
	}
	if un, err := b.store.UnconfirmedInstructions(b.ctx, ed.ID, cats); err != nil || len(un) != 0 {
		t.Errorf("unconfirmed after the confirmation = %q, %v; want none", un, err)
	}
	if _, _, err := b.store.SetInstructions(b.ctx, "news", "Be kind and brief.", tasks.InstructionsFromAPI); err != nil {
		t.Fatal(err)
	}
	if un, err := b.store.UnconfirmedInstructions(b.ctx, ed.ID, cats); err != nil || len(un) != 1 || un[0] != "news" {
		t.Errorf("unconfirmed after version 2 = %q, %v; want news again", un, err)
	}
	eis, err := b.store.EditorInstructions(b.ctx, ed.ID, cats)
	if err != nil || len(eis) != 2 {
		t.Fatalf("editor instructions = %+v, %v; want news and sport", eis, err)
	}
	if n := eis[0]; n.Category != "news" || n.Version != 2 || n.Confirmed != 1 || !n.Pending() || n.Body != "Be kind and brief." {
		t.Errorf("news = %+v; want version 2, 1 confirmed, pending", n)
	}
	if s := eis[1]; s.Category != "sport" || s.Pending() {
		t.Errorf("sport = %+v; want empty, not pending", s)
	}
	var acks int
	if err := b.db.GetContext(b.ctx, &acks, `SELECT COUNT(*) FROM editor_instruction_acks WHERE editor_id = ?`, ed.ID); err != nil || acks != 1 {
		t.Errorf("acks recorded = %d, %v; want 1", acks, err)
	}
}
