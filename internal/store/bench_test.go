package store_test

import (
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// BenchmarkClaimSubmit measures one claim and one submit of a pending task,
// one after the other, on the one-round-trip batches (batch) against the
// locking transaction the store uses for takeovers (locking), and the batches
// when webhooks subscribe to every event, so that each submit also writes the
// outbox in its batch (batch+outbox).
func BenchmarkClaimSubmit(b *testing.B) {
	for name, c := range map[string]struct {
		status tasks.Status
		cfg    store.Config
	}{
		"batch":        {tasks.StatusPending, store.Config{}},
		"locking":      {"", store.Config{}},
		"batch+outbox": {tasks.StatusPending, store.Config{WebhookEvents: tasks.WebhookEvents()}},
	} {
		status := c.status
		b.Run(name, func(b *testing.B) {
			s := setup(b, c.cfg)
			ed := s.editor(b, "ed", "news")
			nts := make([]tasks.NewTask, b.N)
			for i := range nts {
				nts[i] = tasks.NewTask{Category: "news", Title: "t"}
			}
			ids := s.insert(b, nts...)
			b.ResetTimer()
			for _, id := range ids {
				c, err := s.store.Claim(s.ctx, tasks.ClaimParams{TaskID: id, Status: status, Holder: ed.Holder(), EditorID: ed.ID, Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.store.Submit(s.ctx, tasks.SubmitParams{TaskID: id, Fence: c.Fence, Holder: ed.Holder(), Result: rawJSON(`{}`)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
