package store

import (
	"reflect"
	"strings"
	"testing"

	"github.com/taskd/taskd/tasks"
)

// TestTaskFieldsFollowTaskColumns checks that taskFields names, in order,
// the fields sqlx would fill from each of taskColumns' columns.
func TestTaskFieldsFollowTaskColumns(t *testing.T) {
	t.Parallel()
	var cols []string
	depth, start := 0, 0
	for i, r := range taskColumns + "," {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				item := strings.Fields(taskColumns[start:i])
				cols = append(cols, item[len(item)-1])
				start = i + 1
			}
		}
	}
	var task tasks.Task
	fields := taskFields(&task)
	if len(fields) != len(cols) {
		t.Fatalf("taskFields gives %d destinations for %d columns %v", len(fields), len(cols), cols)
	}
	v := reflect.ValueOf(&task).Elem()
	for i, dest := range fields {
		tag := ""
		for f := range v.NumField() {
			if v.Field(f).Addr().Interface() == dest {
				tag = v.Type().Field(f).Tag.Get("db")
			}
		}
		if tag != cols[i] {
			t.Errorf("destination %d is the field of column %q, want %q", i, tag, cols[i])
		}
	}
}

// TestGoldCopyColumnNamesGoldRunAfter: the literal goldCopyColumnSQL compares
// run_after with is tasks.GoldRunAfter.
func TestGoldCopyColumnNamesGoldRunAfter(t *testing.T) {
	t.Parallel()
	if want := "TIMESTAMP'" + tasks.GoldRunAfter.UTC().Format("2006-01-02 15:04:05") + "'"; !strings.Contains(goldCopyColumnSQL, want) {
		t.Errorf("goldCopyColumnSQL = %q, want it to compare with %s", goldCopyColumnSQL, want)
	}
}
