package wordcount

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

func TestCount(t *testing.T) {
	t.Parallel()
	cases := map[string]int{
		"":                               0,
		"   \n\t ":                       0,
		"one":                            1,
		"The quick  brown\nfox":          4,
		"naïve café — déjà vu":           5,
		"tabs\tand\u00a0no-break spaces": 4,
	}
	for text, want := range cases {
		if got := Count(text); got != want {
			t.Errorf("Count(%q) = %d, want %d", text, got, want)
		}
	}
}

func TestHandler(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h := Handler(slog.New(slog.NewJSONHandler(&logs, nil)))
	payload, _ := json.Marshal(Payload{Text: "a secret sentence of six words"})
	task := &tasks.Task{ID: 7, Category: Category, Payload: payload}
	res, err := h.ProcessTask(context.Background(), task)
	if err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}
	if b, _ := json.Marshal(res); string(b) != `{"words":6}` {
		t.Errorf("result = %s, want {\"words\":6}", b)
	}
	var line struct {
		TaskID int64 `json:"task_id"`
		Words  int   `json:"words"`
	}
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("log line %q: %v", logs.String(), err)
	}
	if line.TaskID != 7 || line.Words != 6 {
		t.Errorf("logged task %d with %d words, want task 7 with 6", line.TaskID, line.Words)
	}
	if strings.Contains(logs.String(), "secret") {
		t.Errorf("the log shows the payload: %s", logs.String())
	}

	for _, p := range []string{`{}`, `{"text": 5}`, `{"text": null}`, `not json`} {
		_, err := h.ProcessTask(context.Background(), &tasks.Task{ID: 8, Category: Category, Payload: json.RawMessage(p)})
		if !errors.Is(err, taskd.SkipRetry) {
			t.Errorf("payload %s: err = %v, want one wrapping taskd.SkipRetry", p, err)
		}
	}
}
