package store_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestUpdateEditor(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	ann := b.editor(t, "ann", "news", "arts")
	b.editor(t, "bob", "news")
	ptr := func(s string) *string { return &s }

	// A live claim is kept through the change.
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)

	ed, err := b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Categories: []string{"sport", "tech", "sport"}})
	if err != nil {
		t.Fatal(err)
	}
	if ed.Name != "ann" || !slices.Equal(ed.Categories, []string{"sport", "tech"}) {
		t.Errorf("after new categories: %+v", ed)
	}
	ed, err = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Name: ptr("Annie")})
	if err != nil {
		t.Fatal(err)
	}
	if ed.Name != "Annie" || !slices.Equal(ed.Categories, []string{"sport", "tech"}) {
		t.Errorf("after a new name: %+v", ed)
	}
	ed, err = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Name: ptr("Ann B."), Categories: []string{"news"}})
	if err != nil || ed.Name != "Ann B." || !slices.Equal(ed.Categories, []string{"news"}) {
		t.Errorf("after both: %+v, %v", ed, err)
	}
	if held, err := b.store.HeldByEditor(b.ctx, ann.ID); err != nil || held.Fence != c.Fence {
		t.Errorf("ann's claim after the changes: %+v, %v; want fence %d", held, err, c.Fence)
	}

	before := b.count(t, `SELECT COUNT(*) FROM editor_categories`)
	many := make([]string, tasks.MaxCategories+1)
	for i := range many {
		many[i] = fmt.Sprint("c", i)
	}
	for name, p := range map[string]tasks.UpdateEditorParams{
		"nothing":          {ID: ann.ID},
		"empty name":       {ID: ann.ID, Name: ptr("")},
		"long name":        {ID: ann.ID, Name: ptr(strings.Repeat("é", tasks.MaxEditorNameLen+1))},
		"bad UTF-8":        {ID: ann.ID, Name: ptr("a\xff")},
		"empty categories": {ID: ann.ID, Categories: []string{}},
		"bad category":     {ID: ann.ID, Categories: []string{"news", " arts"}},
		"many categories":  {ID: ann.ID, Categories: many},
		"bad with good":    {ID: ann.ID, Name: ptr("fine"), Categories: []string{""}},
	} {
		_, err := b.store.UpdateEditor(b.ctx, p)
		wantErr(t, name, err, tasks.ErrInvalid)
	}
	_, err = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID, Name: ptr("BOB"), Categories: []string{"arts"}})
	wantErr(t, "taken name", err, tasks.ErrDuplicate)
	_, err = b.store.UpdateEditor(b.ctx, tasks.UpdateEditorParams{ID: ann.ID + 100, Name: ptr("zed")})
	wantErr(t, "unknown editor", err, tasks.ErrNotFound)
	ed, err = b.store.GetEditor(b.ctx, ann.ID)
	if err != nil || ed.Name != "Ann B." || !slices.Equal(ed.Categories, []string{"news"}) {
		t.Errorf("after refused changes: %+v, %v; want them unchanged", ed, err)
	}
	if n := b.count(t, `SELECT COUNT(*) FROM editor_categories`); n != before {
		t.Errorf("%d editor categories after refused changes, want %d", n, before)
	}
}
