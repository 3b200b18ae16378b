package dispatcher

import (
	"slices"
	"strings"
)

// Queues. The candidate pool keeps candidates per queue: a category, whose
// candidates are its tasks at any stage, or a category and one of its stages,
// for editors limited to some stages of it (tasks.Editor.Stages). A queue's key
// is the category, or for a stage: stageQueueMark, the stage, stageQueueSep and
// the category. Categories hold no control characters (tasks.CheckCategory)
// and stage names only lowercase letters, digits, '_' and '-', so the mark
// tells the two kinds apart and the first separator ends the stage.
const (
	stageQueueMark = "\x1e"
	stageQueueSep  = "\x1f"
)

// stageQueue returns the key of the queue of category's tasks at stage.
func stageQueue(category, stage string) string {
	return stageQueueMark + stage + stageQueueSep + category
}

// queueParts returns the category of a queue key and its stage, "" for a
// queue of every stage.
func queueParts(key string) (category, stage string) {
	rest, ok := strings.CutPrefix(key, stageQueueMark)
	if !ok {
		return key, ""
	}
	stage, category, _ = strings.Cut(rest, stageQueueSep)
	return category, stage
}

// queueCategory returns the category of a queue key.
func queueCategory(key string) string {
	category, _ := queueParts(key)
	return category
}

// queues returns the keys of the claimant's queues: one per category, or one
// per stage of a category its Stages limit it to.
func (c Claimant) queues() []string {
	if len(c.Stages) == 0 {
		return c.Categories
	}
	out := make([]string, 0, len(c.Categories))
	for _, cat := range c.Categories {
		stages, limited := c.Stages[cat]
		if !limited {
			out = append(out, cat)
			continue
		}
		for _, st := range slices.Sorted(slices.Values(stages)) {
			out = append(out, stageQueue(cat, st))
		}
	}
	return out
}
