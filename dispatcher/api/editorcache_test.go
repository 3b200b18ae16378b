package api

import (
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

func TestEditorCacheForgetsAfterItsTime(t *testing.T) {
	now := time.Now()
	c := newEditorCache(10*time.Second, 3)
	c.clock = func() time.Time { return now }
	h := [32]byte{1}
	if _, ok := c.get(h); ok {
		t.Fatal("empty cache found an editor")
	}
	c.put(h, &tasks.Editor{ID: 7})
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
	c := newEditorCache(time.Minute, 3)
	c.clock = func() time.Time { return now }
	for i := range 10 {
		c.put([32]byte{byte(i)}, &tasks.Editor{ID: int64(i)})
		if n := len(c.entries); n > 3 {
			t.Fatalf("%d entries, bound 3", n)
		}
	}
	if _, ok := c.get([32]byte{9}); !ok {
		t.Error("the newest entry was evicted")
	}
}

func TestEditorCacheOff(t *testing.T) {
	c := newEditorCache(-1, 3)
	c.put([32]byte{1}, &tasks.Editor{ID: 7})
	if _, ok := c.get([32]byte{1}); ok || len(c.entries) != 0 {
		t.Error("a cache that is off remembered an editor")
	}
}
