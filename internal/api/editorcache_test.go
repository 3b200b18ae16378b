package api

import (
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

func TestEditorCacheForgetsAfterItsTime(t *testing.T) {
	now := time.Now()
	c := newEditorCache(10*time.Second, 3, 3)
	c.clock = func() time.Time { return now }
	h := [32]byte{1}
	if _, ok := c.get(h); ok {
		t.Fatal("empty cache found an editor")
	}
	c.put(h, &tasks.Editor{ID: 7}, c.generation())
	if e, ok := c.get(h); !ok || e.ID != 7 {
		t.Fatalf("get = %v, %v; want editor 7", e, ok)
	}
	now = now.Add(10 * time.Second)
	if _, ok := c.get(h); ok {
		t.Error("an entry outlived its time")
	}
}

func TestEditorCacheStaysWithinItsBound(t *testing.T) {
	now := time.Now()
	c := newEditorCache(time.Minute, 3, 3)
	c.clock = func() time.Time { return now }
	for i := range 10 {
		c.put([32]byte{byte(i)}, &tasks.Editor{ID: int64(i)}, c.generation())
		if n := len(c.entries); n > 3 {
			t.Fatalf("%d entries, bound 3", n)
		}
	}
	if _, ok := c.get([32]byte{9}); !ok {
		t.Error("the newest entry was evicted")
	}
}

func TestEditorCacheOff(t *testing.T) {
	c := newEditorCache(-1, 3, 3)
	c.put([32]byte{1}, &tasks.Editor{ID: 7}, c.generation())
	if _, ok := c.get([32]byte{1}); ok || len(c.entries) != 0 {
		t.Error("a cache that is off remembered an editor")
	}
}

func TestEditorCacheForgetsAnEditorByID(t *testing.T) {
	c := newEditorCache(time.Minute, 10, 3)
	old, rotated, other := [32]byte{1}, [32]byte{2}, [32]byte{3}
	c.put(old, &tasks.Editor{ID: 7}, c.generation())
	c.put(other, &tasks.Editor{ID: 8}, c.generation())
	c.forget(7)
	if _, ok := c.get(old); ok {
		t.Error("a forgotten editor is still found")
	}
	if e, ok := c.get(other); !ok || e.ID != 8 {
		t.Error("forgetting editor 7 dropped editor 8")
	}

	// An editor read before a forget is not kept: it may predate the change.
	gen := c.generation()
	c.forget(7)
	c.put(old, &tasks.Editor{ID: 7}, gen)
	if _, ok := c.get(old); ok {
		t.Error("an editor read before a forget was kept")
	}

	// A new token replaces the old one's entry.
	c.put(old, &tasks.Editor{ID: 7}, c.generation())
	c.put(rotated, &tasks.Editor{ID: 7}, c.generation())
	if _, ok := c.get(old); ok {
		t.Error("the old token's entry outlived the new one's")
	}
	c.forget(7)
	if _, ok := c.get(rotated); ok || len(c.entries) != 1 || len(c.byID) != 1 {
		t.Errorf("after forgetting 7: rotated found %v, %d entries, %d ids; want only editor 8", ok, len(c.entries), len(c.byID))
	}
}

func TestEditorCacheRemembersUnknownTokens(t *testing.T) {
	now := time.Now()
	c := newEditorCache(10*time.Second, 3, 2)
	c.clock = func() time.Time { return now }
	h := [32]byte{1}
	if c.isUnknown(h) {
		t.Fatal("an empty cache knows an unknown token")
	}
	c.putUnknown(h, c.generation())
	if !c.isUnknown(h) {
		t.Fatal("an unknown token was not remembered")
	}
	now = now.Add(10 * time.Second)
	if c.isUnknown(h) {
		t.Error("an unknown token outlived its time")
	}
	for i := range 10 {
		c.putUnknown([32]byte{byte(i)}, c.generation())
		if n := len(c.unknown); n > 2 {
			t.Fatalf("%d unknown tokens, bound 2", n)
		}
	}
	if !c.isUnknown([32]byte{9}) {
		t.Error("the newest unknown token was evicted")
	}
	if n := len(c.entries); n != 0 {
		t.Errorf("unknown tokens took %d editor entries", n)
	}
}

func TestEditorCacheTakesNewTokensOffTheUnknown(t *testing.T) {
	c := newEditorCache(time.Minute, 3, 3)
	h := [32]byte{1}
	c.putUnknown(h, c.generation())
	c.known(h)
	if c.isUnknown(h) {
		t.Error("a token made here is still unknown")
	}
	// A read that began before the token was made may have found nothing; it
	// must not mark the token unknown.
	gen := c.generation()
	c.known(h)
	c.putUnknown(h, gen)
	if c.isUnknown(h) {
		t.Error("a read older than the token marked it unknown")
	}
}
