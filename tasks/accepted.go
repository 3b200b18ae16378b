package tasks

import (
	"encoding/json"
	"time"
)

// AcceptedResult is an accepted submission: a row of task_results.
type AcceptedResult struct {
	TaskID int64 `db:"task_id"`
	// Fence is the fence of the claim whose submission was accepted.
	Fence    int64           `db:"fence"`
	Holder   string          `db:"holder"`
	EditorID int64           `db:"editor_id"`
	Result   json.RawMessage `db:"result"`
	// SubmittedAt is when the submission was accepted, by the database clock.
	SubmittedAt time.Time `db:"submitted_at"`
}
