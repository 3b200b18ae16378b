package dispatcher

import (
	"slices"
	"testing"
)

func TestQueues(t *testing.T) {
	c := Claimant{Categories: []string{"desk", "news", "a\x1fb"}, Stages: map[string][]string{"desk": {"review", "legal"}}}
	got := c.queues()
	want := []string{stageQueue("desk", "legal"), stageQueue("desk", "review"), "news", "a\x1fb"}
	if !slices.Equal(got, want) {
		t.Fatalf("queues = %q, want %q", got, want)
	}
	for _, key := range got {
		cat, stage := queueParts(key)
		switch key {
		case "news", "a\x1fb":
			if cat != key || stage != "" {
				t.Errorf("%q: category %q stage %q", key, cat, stage)
			}
		default:
			if cat != "desk" || (stage != "review" && stage != "legal") {
				t.Errorf("%q: category %q stage %q", key, cat, stage)
			}
		}
	}
	if q := (Claimant{Categories: []string{"news"}}).queues(); !slices.Equal(q, []string{"news"}) {
		t.Errorf("an editor without limits: %q", q)
	}
}
