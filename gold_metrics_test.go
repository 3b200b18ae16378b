package taskd

import (
	"testing"

	"github.com/taskd/taskd/tasks"
)

// goldByCategory sums each category's editors; a category without answers is
// left out.
func TestGoldByCategory(t *testing.T) {
	t.Parallel()
	got := goldByCategory([]tasks.GoldAccuracy{
		{EditorID: 1, Category: "news", Answers: 3, Correct: 3},
		{EditorID: 2, Category: "news", Answers: 1, Correct: 0},
		{EditorID: 1, Category: "facts", Answers: 0},
		{EditorID: 3, Category: "labels", Answers: 4, Correct: 1},
	})
	if len(got) != 2 || got[0].Category != "news" || got[0].Value != 0.75 || got[1].Category != "labels" || got[1].Value != 0.25 {
		t.Errorf("gold by category = %+v, want news 0.75, labels 0.25", got)
	}
}
