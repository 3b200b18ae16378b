// Package wordcount is taskd's example worker handler: tasks of category
// "wordcount" carry a text in their payload, {"text": "..."}, and the handler
// counts its words and stores {"words": N} as the task's result.
package wordcount

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// Category is the category the handler serves.
const Category = "wordcount"

// Payload is the payload of a wordcount task.
type Payload struct {
	Text string `json:"text"`
}

// Count returns the number of words in text: runs of characters between
// Unicode white space.
func Count(text string) int { return len(strings.Fields(text)) }

// Result is the result of a wordcount task.
type Result struct {
	Words int `json:"words"`
}

// Handler returns the handler of wordcount tasks, logging each count to log
// (with the task's id, never the text).
// Its result is a Result. A payload without a text string is a permanent
// failure (wrapping taskd.SkipRetry): trying again cannot fix it.
func Handler(log *slog.Logger) taskd.Handler {
	return taskd.HandlerFunc(func(ctx context.Context, t *tasks.Task) (any, error) {
		var p struct {
			Text *string `json:"text"`
		}
		dec := json.NewDecoder(bytes.NewReader(t.Payload))
		if err := dec.Decode(&p); err != nil {
			return nil, fmt.Errorf("wordcount task %d: payload: %v: %w", t.ID, err, taskd.SkipRetry)
		}
		if p.Text == nil {
			return nil, fmt.Errorf("wordcount task %d: payload has no \"text\" string: %w", t.ID, taskd.SkipRetry)
		}
		n := Count(*p.Text)
		log.InfoContext(ctx, "words counted", "task_id", t.ID, "words", n)
		return Result{Words: n}, nil
	})
}
