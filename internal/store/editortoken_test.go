package store_test

import (
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

func TestSetEditorToken(t *testing.T) {
	t.Parallel()
	b := setup(t, store.Config{})
	oldToken, oldHash := tasks.NewToken()
	ann, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "ann", Categories: []string{"news"}, TokenHash: oldHash})
	if err != nil {
		t.Fatal(err)
	}
	bobToken, bobHash := tasks.NewToken()
	if _, err := b.store.CreateEditor(b.ctx, tasks.CreateEditorParams{Name: "bob", Categories: []string{"news"}, TokenHash: bobHash}); err != nil {
		t.Fatal(err)
	}
	id := b.insertOne(t, "news", 0)
	c := b.claim(t, id, ann.Holder(), ann.ID, time.Minute)

	newToken, newHash := tasks.NewToken()
	if err := b.store.SetEditorToken(b.ctx, ann.ID, newHash); err != nil {
		t.Fatal(err)
	}
	_, err = b.store.EditorByTokenHash(b.ctx, tasks.HashToken(oldToken))
	wantErr(t, "the old token", err, tasks.ErrNotFound)
	if e, err := b.store.EditorByTokenHash(b.ctx, tasks.HashToken(newToken)); err != nil || e.ID != ann.ID {
		t.Errorf("the new token finds %+v, %v; want ann", e, err)
	}
	if held, err := b.store.HeldByEditor(b.ctx, ann.ID); err != nil || held.Fence != c.Fence {
		t.Errorf("ann's claim after the new token: %+v, %v; want fence %d", held, err, c.Fence)
	}

	wantErr(t, "another editor's token", b.store.SetEditorToken(b.ctx, ann.ID, tasks.HashToken(bobToken)), tasks.ErrDuplicate)
	wantErr(t, "a zero hash", b.store.SetEditorToken(b.ctx, ann.ID, [32]byte{}), tasks.ErrInvalid)
	_, h := tasks.NewToken()
	wantErr(t, "an unknown editor", b.store.SetEditorToken(b.ctx, ann.ID+100, h), tasks.ErrNotFound)
	if e, err := b.store.EditorByTokenHash(b.ctx, newHash); err != nil || e.ID != ann.ID {
		t.Errorf("after refused changes the token finds %+v, %v; want ann", e, err)
	}
}
