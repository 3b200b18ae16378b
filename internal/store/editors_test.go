package store_test

import (
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestEditors(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	token, hash := tasks.NewToken()
	ed, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{
		Name: "Alice", Categories: []string{"sport", "news", "sport"}, TokenHash: hash,
	})
	if err != nil {
		t.Fatal(err)
	}
	if ed.ID == 0 || ed.Name != "Alice" || strings.Join(ed.Categories, ",") != "news,sport" || ed.CreatedAt.IsZero() {
		t.Errorf("editor = %+v", ed)
	}
	if ed.Holder() != tasks.EditorHolder(ed.ID) {
		t.Errorf("holder = %q", ed.Holder())
	}

	byHash, err := b.store.EditorByTokenHash(b.ctx, tasks.HashToken(token))
	if err != nil || byHash.ID != ed.ID || strings.Join(byHash.Categories, ",") != "news,sport" {
		t.Errorf("by token hash = %+v, %v", byHash, err)
	}
	_, err = b.store.EditorByTokenHash(b.ctx, tasks.HashToken(token+"x"))
	wantErr(t, "unknown token", err, tasks.ErrNotFound)
	byID, err := b.store.GetEditor(b.ctx, ed.ID)
	if err != nil || byID.Name != "Alice" {
		t.Errorf("by id = %+v, %v", byID, err)
	}
	_, err = b.store.GetEditor(b.ctx, ed.ID+1)
	wantErr(t, "unknown editor", err, tasks.ErrNotFound)

	_, hash2 := tasks.NewToken()
	_, err = b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "alice", Categories: []string{"news"}, TokenHash: hash2})
	wantErr(t, "duplicate name (case-insensitive)", err, tasks.ErrDuplicate)
	_, err = b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "bob", Categories: []string{"news"}, TokenHash: hash})
	wantErr(t, "duplicate token", err, tasks.ErrDuplicate)

	for name, p := range map[string]tasks.CreateEditorParams{
		"no name":       {Categories: []string{"news"}, TokenHash: hash2},
		"no categories": {Name: "carol", TokenHash: hash2},
		"bad category":  {Name: "carol", Categories: []string{" news"}, TokenHash: hash2},
		"no hash":       {Name: "carol", Categories: []string{"news"}},
	} {
		_, err := b.store.CreateEditor(b.ctx, p)
		wantErr(t, name, err, tasks.ErrInvalid)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editors`); n != 1 {
		t.Errorf("%d editors, want 1", n)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editor_categories`); n != 2 {
		t.Errorf("%d editor categories, want 2", n)
	}
}
