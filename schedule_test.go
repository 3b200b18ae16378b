package taskd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

// lockedBuffer is a log sink safe for concurrent writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

// TestSchedulesFireOncePerTickAcrossReplicas runs two engines (replicas) on one
// database with an @every 1s schedule: each tick makes exactly one task, keyed
// by the tick, whichever replica inserts it, and both replicas fire the ticks.
func TestSchedulesFireOncePerTickAcrossReplicas(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db := storetest.NewDB(t)
	rdb := testenv.Redis(t)
	prefix := testenv.Prefix(t)
	cfg := taskd.Config{
		Redis: taskd.RedisConfig{KeyPrefix: prefix},
		Schedules: []taskd.ScheduleConfig{{
			Name: "digest", Spec: "@every 1s", Category: "digests", Title: "Daily digest",
			Payload: map[string]any{"edition": "morning", "sections": []any{"news", "sport"}}, Priority: 3,
		}},
	}
	var logs [2]*lockedBuffer
	var engines [2]*taskd.Engine
	for i := range engines {
		logs[i] = &lockedBuffer{}
		e, err := taskd.New(cfg, taskd.WithDB(db), taskd.WithRedis(rdb),
			taskd.WithLogger(slog.New(slog.NewTextHandler(logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Stop(context.Background()) })
		engines[i] = e
	}
	for _, e := range engines {
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		var n int
		if err := db.GetContext(ctx, &n, `SELECT COUNT(*) FROM tasks`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// Four ticks, and at least one that both replicas fired.
	testenv.Eventually(t, 20*time.Second, "four ticks fired by both replicas", func() bool {
		both := logs[0].count(existingMsg) + logs[1].count(existingMsg)
		return count() >= 4 && both >= 1
	})
	for _, e := range engines {
		if err := e.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}

	var rows []struct {
		Key      string `db:"task_key"`
		Category string `db:"category"`
		Title    string `db:"title"`
		Priority int    `db:"priority"`
		Payload  string `db:"payload"`
	}
	if err := db.SelectContext(ctx, &rows, `SELECT task_key, category, title, priority, payload FROM tasks ORDER BY task_key`); err != nil {
		t.Fatal(err)
	}
	var ticks []time.Time
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r.Key] {
			t.Errorf("tick %s made two tasks", r.Key)
		}
		seen[r.Key] = true
		at, ok := strings.CutPrefix(r.Key, "schedule:digest:")
		tick, err := time.Parse(time.RFC3339, at)
		if !ok || err != nil || !strings.HasSuffix(at, "Z") || tick.Nanosecond() != 0 {
			t.Fatalf("key %q is not schedule:digest:<tick, UTC, RFC 3339>", r.Key)
		}
		ticks = append(ticks, tick)
		var payload map[string]any
		if err := json.Unmarshal([]byte(r.Payload), &payload); err != nil || payload["edition"] != "morning" ||
			r.Category != "digests" || r.Title != "Daily digest" || r.Priority != 3 {
			t.Errorf("task %+v, want the schedule's task", r)
		}
	}
	for i := 1; i < len(ticks); i++ {
		// Whole seconds apart; more than one only when both replicas were held
		// up past a tick (a loaded machine), which costs that tick, never a
		// second task.
		if gap := ticks[i].Sub(ticks[i-1]); gap < time.Second || gap%time.Second != 0 {
			t.Errorf("ticks %v and %v are %v apart, want whole seconds", ticks[i-1], ticks[i], gap)
		} else if gap > time.Second {
			t.Logf("no task between %v and %v: no replica fired in time", ticks[i-1], ticks[i])
		}
	}
	// Each tick was made by one replica, and found made by the other at most
	// once.
	created := logs[0].count(createdMsg) + logs[1].count(createdMsg)
	existing := logs[0].count(existingMsg) + logs[1].count(existingMsg)
	if created != len(rows) || existing > len(rows) {
		t.Errorf("replicas logged %d tasks made and %d found made, the table has %d", created, existing, len(rows))
	}
}

// The messages of the scheduler's logs, as the text handler writes them.
const (
	createdMsg  = `msg="periodic task added" `
	existingMsg = `msg="periodic task added by another replica" `
)

func TestScheduleConfigValidation(t *testing.T) {
	t.Parallel()
	ok := taskd.ScheduleConfig{Name: "a", Spec: "@hourly", Category: "c", Title: "t"}
	for _, c := range []struct {
		sc        []taskd.ScheduleConfig
		key, want string
	}{
		{[]taskd.ScheduleConfig{ok, {Name: "b", Spec: "every hour", Category: "c", Title: "t"}}, "schedules[1].spec", "want a duration, @every"},
		{[]taskd.ScheduleConfig{ok, ok}, "schedules[1].name", `"a" is the name of schedules[0] too`},
		{[]taskd.ScheduleConfig{{Name: "has space", Spec: "@hourly", Category: "c", Title: "t"}}, "schedules[0].name", "may hold only letters"},
		{[]taskd.ScheduleConfig{{Spec: "@hourly", Category: "c", Title: "t"}}, "schedules[0].name", "name is required"},
		{[]taskd.ScheduleConfig{{Name: "a", Spec: "@hourly", Title: "t"}}, "schedules[0].category", "category is required"},
		{[]taskd.ScheduleConfig{{Name: "a", Spec: "@hourly", Category: "c"}}, "schedules[0].title", "title is required"},
		{[]taskd.ScheduleConfig{{Name: "a", Spec: "@every 1500ms", Category: "c", Title: "t"}}, "schedules[0].spec", "whole number of seconds"},
		{[]taskd.ScheduleConfig{{Name: "a", Spec: "@hourly", Category: "c", Title: "t", Payload: map[string]any{"f": func() {}}}}, "schedules[0].payload", "cannot be JSON"},
	} {
		err := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(127.0.0.1:3306)/db"}, Schedules: c.sc}.WithDefaults().Validate()
		var ce *taskd.ConfigError
		if !errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(ce.Msg, c.want) {
			t.Errorf("%+v: error %v, want %s: ...%s...", c.sc, err, c.key, c.want)
		}
	}
	err := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(127.0.0.1:3306)/db"},
		Schedules: []taskd.ScheduleConfig{ok, {Name: "b", Spec: "0 30 6 * * MON-FRI", Category: "c", Title: "t", Payload: map[string]any{"x": 1}}}}.WithDefaults().Validate()
	if err != nil {
		t.Errorf("valid schedules: %v", err)
	}
}
