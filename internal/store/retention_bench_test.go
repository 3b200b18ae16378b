package store_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/tasks"
)

// BenchmarkPurgeTasks measures the purge's rate: b.N done tasks, each with a
// result and two events, deleted in batches of 500. Run with -benchtime=200000x
// for the figure docs/design.md gives.
func BenchmarkPurgeTasks(b *testing.B) {
	bb := setup(b, store.Config{InsertBatchSize: 1000})
	bb.exec(b, `INSERT INTO tasks (category, title, payload, status, fence, holder, done_at)
		SELECT 'news', 't', '{"n":1}', 'done', 1, 'w', NOW(3) - INTERVAL 1 HOUR FROM seq_1_to_`+strconv.Itoa(b.N))
	bb.exec(b, `INSERT INTO task_results (task_id, fence, holder, result, seq) SELECT id, 1, 'w', '{"ok":true}', id FROM tasks`)
	bb.exec(b, `INSERT INTO task_events (task_id, kind, fence, holder) SELECT id, 'claimed', 1, 'w' FROM tasks`)
	bb.exec(b, `INSERT INTO task_events (task_id, kind, fence, holder) SELECT id, 'submitted', 1, 'w' FROM tasks`)
	b.ResetTimer()
	start := time.Now()
	var rows int64
	for {
		p, err := bb.store.PurgeTasks(bb.ctx, tasks.StatusDone, time.Minute, 500)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range p.Rows {
			rows += n
		}
		if p.Selected < 500 {
			break
		}
	}
	d := time.Since(start)
	b.ReportMetric(float64(b.N)/d.Seconds(), "tasks/s")
	b.ReportMetric(float64(rows)/d.Seconds(), "rows/s")
}
