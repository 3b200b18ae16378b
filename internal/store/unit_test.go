package store

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/tasks"
)

func TestTruncate(t *testing.T) {
	cases := []struct {
		in   string
		n    int
		want string
	}{
		{"", 3, ""},
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"äöüß", 2, "äö"},
		{"a\xffb", 3, "a\uFFFDb"},
	}
	for _, c := range cases {
		if got := truncate(c.in, c.n); got != c.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestConfig(t *testing.T) {
	c := Config{}.WithDefaults()
	if c.SkipFor != SkipForDefault || c.MaxHold != MaxHoldDefault || c.InsertBatchSize != InsertBatchSizeDefault {
		t.Errorf("defaults = %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
	c = Config{SkipFor: time.Second, MaxHold: time.Minute, InsertBatchSize: 7}.WithDefaults()
	if c.SkipFor != time.Second || c.MaxHold != time.Minute || c.InsertBatchSize != 7 {
		t.Errorf("WithDefaults changed set fields: %+v", c)
	}
	for _, bad := range []Config{
		{InsertBatchSize: -1},
		{InsertBatchSize: 5001},
		{ReplicaTimeout: time.Microsecond},
		{ReplicaRest: -time.Second},
	} {
		if _, err := New(nil, bad); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("NewStore(%+v) error = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestRowOf(t *testing.T) {
	s := &Store{cfg: Config{Workflows: map[string]tasks.Workflow{
		"desk": {Stages: []string{"edit", "review"}, Overlap: 3},
	}}}
	rowOf := s.rowOf
	row, err := rowOf(tasks.NewTask{Category: "news", Title: "t"})
	if err != nil {
		t.Fatalf("valid task: %v", err)
	}
	if row.payload != "{}" || row.maxAttempts != tasks.MaxAttemptsDefault || row.key != nil || row.runAfter != nil || row.dueAt != nil {
		t.Errorf("defaults: %+v", row)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 6_789_000, time.FixedZone("x", 3600))
	row, err = rowOf(tasks.NewTask{Category: "news", Title: "t", Payload: []byte(`{"a":1}`), MaxAttempts: 3, Key: "k", RunAfter: at, DueAt: at})
	if err != nil {
		t.Fatalf("valid task: %v", err)
	}
	want := at.UTC().Truncate(time.Millisecond)
	if row.payload != `{"a":1}` || row.maxAttempts != 3 || row.key != "k" || row.runAfter != want || row.dueAt != want {
		t.Errorf("row: %+v, want times %v", row, want)
	}
	if _, err := rowOf(tasks.NewTask{Category: "news"}); !errors.Is(err, tasks.ErrInvalid) {
		t.Errorf("no title: error = %v, want ErrInvalid", err)
	}

	// Stages and overlap: the task's own, else its category's, else one of each.
	for _, c := range []struct {
		task       tasks.NewTask
		stages     any
		count, ovl int
	}{
		{tasks.NewTask{Category: "news", Title: "t"}, nil, 1, 1},
		{tasks.NewTask{Category: "desk", Title: "t"}, "edit,review", 2, 3},
		{tasks.NewTask{Category: "desk", Title: "t", Stages: []string{}, Overlap: 1}, nil, 1, 1},
		{tasks.NewTask{Category: "desk", Title: "t", Stages: []string{"check"}}, "check", 1, 3},
		{tasks.NewTask{Category: "news", Title: "t", Stages: []string{"a", "b", "c"}, Overlap: 2}, "a,b,c", 3, 2},
	} {
		row, err := rowOf(c.task)
		if err != nil {
			t.Fatalf("%+v: %v", c.task, err)
		}
		if row.stages != c.stages || row.stageCount != c.count || row.overlap != c.ovl {
			t.Errorf("%+v: stages %v (%d), overlap %d; want %v (%d), %d", c.task, row.stages, row.stageCount, row.overlap, c.stages, c.count, c.ovl)
		}
	}
	for _, bad := range []tasks.NewTask{
		{Category: "news", Title: "t", Overlap: 10},
		{Category: "news", Title: "t", Overlap: -1},
		{Category: "news", Title: "t", Stages: []string{"Edit"}},
		{Category: "news", Title: "t", Stages: []string{"a", "a"}},
	} {
		if _, err := rowOf(bad); !errors.Is(err, tasks.ErrInvalid) {
			t.Errorf("%+v: error = %v, want ErrInvalid", bad, err)
		}
	}
}

// On Galera, both writes of RecordAttempt's batch are guarded.
func TestRecordAttemptGaleraGuards(t *testing.T) {
	if n := strings.Count(recordAttemptGaleraSQL, "@@in_transaction = 1"); n != 2 {
		t.Errorf("recordAttemptGaleraSQL has %d guards, want 2:\n%s", n, recordAttemptGaleraSQL)
	}
	if strings.Count(recordAttemptGaleraSQL, "?") != strings.Count(recordAttemptSQL, "?") {
		t.Error("the guarded batch takes other arguments")
	}
}
