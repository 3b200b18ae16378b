package web

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
)

// clock is a settable time for the sessions' now.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// TestSessionLifetime: a session in use is extended by the idle time, never
// past its lifetime, and is refused and deleted once the lifetime has
// passed, however recently it was used.
func TestSessionLifetime(t *testing.T) {
	t.Parallel()
	rdb := testenv.Redis(t)
	clk := &clock{t: time.Now()}
	s := editorSessions(rdb, testenv.Prefix(t))
	s.idle, s.lifetime, s.now = time.Hour, 4*time.Hour, clk.now
	id := randomToken()
	if err := s.create(t.Context(), id, &session{EditorID: 7, EditorName: "ada"}); err != nil {
		t.Fatal(err)
	}
	// Used every 50 minutes: each read extends it by the idle time...
	for range 3 {
		clk.t = clk.t.Add(50 * time.Minute)
		if _, err := s.get(t.Context(), id); err != nil {
			t.Fatalf("get at %v: %v", clk.t, err)
		}
	}
	ttl, err := rdb.PTTL(t.Context(), s.key(id)).Result()
	if err != nil || ttl <= 50*time.Minute || ttl > time.Hour {
		t.Fatalf("TTL %v, %v after a read with 90m of the lifetime left: want the idle time", ttl, err)
	}
	// ...but not past the lifetime's end: 10 minutes before it, the key
	// lives 10 minutes.
	clk.t = clk.t.Add(80 * time.Minute)
	if _, err := s.get(t.Context(), id); err != nil {
		t.Fatalf("get 10m before the end: %v", err)
	}
	ttl, err = rdb.PTTL(t.Context(), s.key(id)).Result()
	if err != nil || ttl <= 9*time.Minute || ttl > 10*time.Minute {
		t.Fatalf("TTL %v, %v 10m before the end: want 10m", ttl, err)
	}
	// At the end it is refused and deleted, though used 10 minutes ago.
	clk.t = clk.t.Add(10 * time.Minute)
	if _, err := s.get(t.Context(), id); !errors.Is(err, errNoSession) {
		t.Fatalf("get at the end: %v, want errNoSession", err)
	}
	if n, err := rdb.Exists(t.Context(), s.key(id)).Result(); err != nil || n != 0 {
		t.Fatalf("the session's key exists (%d, %v) after its end", n, err)
	}

	// A record without an end (as kept before lifetimes) is none.
	if err := rdb.Set(t.Context(), s.key("old"), `{"editor_id":7,"csrf":"x"}`, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.get(t.Context(), "old"); !errors.Is(err, errNoSession) {
		t.Fatalf("a session without an end: %v, want errNoSession", err)
	}
}

// TestEndEditorSessions: ending an editor's sessions deletes each of them,
// on a single Redis and on a Cluster (where each key is in its own slot),
// and no other editor's.
func TestEndEditorSessions(t *testing.T) {
	t.Parallel()
	for name, rdb := range map[string]redis.UniversalClient{"single": testenv.Redis(t), "cluster": testenv.Cluster(t)} {
		t.Run(name, func(t *testing.T) {
			s := editorSessions(rdb, testenv.Prefix(t))
			s.idle, s.lifetime = time.Hour, 24*time.Hour
			var ada []string
			for range 5 {
				id := randomToken()
				if err := s.create(t.Context(), id, &session{EditorID: 1}); err != nil {
					t.Fatal(err)
				}
				ada = append(ada, id)
			}
			bo := randomToken()
			if err := s.create(t.Context(), bo, &session{EditorID: 2}); err != nil {
				t.Fatal(err)
			}
			ttl, err := rdb.PTTL(t.Context(), s.indexKey(1)).Result()
			if err != nil || ttl <= 23*time.Hour || ttl > 24*time.Hour {
				t.Fatalf("the editor's set lives %v, %v: want the lifetime", ttl, err)
			}
			n, err := s.endEditor(t.Context(), 1)
			if err != nil || n != 5 {
				t.Fatalf("endEditor = %d, %v; want 5", n, err)
			}
			for _, id := range ada {
				if _, err := s.get(t.Context(), id); !errors.Is(err, errNoSession) {
					t.Errorf("an ended session: %v, want errNoSession", err)
				}
			}
			if _, err := s.get(t.Context(), bo); err != nil {
				t.Errorf("another editor's session: %v", err)
			}
			if n, err := s.endEditor(t.Context(), 1); err != nil || n != 0 {
				t.Errorf("endEditor again = %d, %v; want 0", n, err)
			}
		})
	}
}
