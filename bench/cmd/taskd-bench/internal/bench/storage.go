package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/tasks"
)

// Scenario storage: what a finished task takes on disk, for the sizing of
// retention. For each payload size, a fresh database gets StorageTasks tasks
// with a payload of that size, background workers run them and each returns a
// result of the same size, and the tables tasks, task_events and
// task_results are measured (data_length + index_length after ANALYZE
// TABLE) before and after: their growth over the tasks is the bytes a done
// task keeps until retention purges it.

// StorageTasks is how many tasks each size runs: enough that InnoDB's
// allocation by extents of 1 MiB weighs little in the figure.
const StorageTasks = 20_000

// StorageSizes are the payload sizes measured, in bytes of JSON: a tiny
// payload ({"n":…}), 1 KiB and 10 KiB.
var StorageSizes = []int{0, 1 << 10, 10 << 10}

// StorageFigure is what one payload size measured.
type StorageFigure struct {
	// PayloadBytes is the size of each task's payload and of its result, in
	// bytes of JSON.
	PayloadBytes int   `json:"payload_bytes"`
	Tasks        int64 `json:"tasks"`
	// Before and After are the tables before the tasks went in and once all
	// were done.
	Before []TableFigure `json:"before"`
	After  []TableFigure `json:"after"`
	// JobsPerSec is the workers' rate, for the record.
	JobsPerSec float64 `json:"jobs_per_s"`
}

// BytesPerTask is the growth of the tables over the tasks, per task.
func (f StorageFigure) BytesPerTask() float64 {
	var grew int64
	for i := range f.After {
		grew += f.After[i].Bytes - f.Before[i].Bytes
	}
	return float64(grew) / float64(max(f.Tasks, 1))
}

// MeasureStorage runs scenario storage: n tasks for each of sizes (0: a tiny
// payload), in a database of its own each.
func MeasureStorage(ctx context.Context, cfg Config, sizes []int, n int) ([]StorageFigure, error) {
	var out []StorageFigure
	for _, size := range sizes {
		cfg.progress("storage: %d tasks with a payload and a result of %d bytes", n, size)
		f, err := measureStorage(ctx, cfg, size, n)
		if err != nil {
			return out, fmt.Errorf("storage, payload %d bytes: %w", size, err)
		}
		out = append(out, *f)
	}
	return out, nil
}

func measureStorage(ctx context.Context, cfg Config, size, n int) (_ *StorageFigure, err error) {
	bd, err := createDB(ctx, cfg.MySQLDSN, "")
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := bd.drop(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	if err := bd.openStore(ctx, Workload{}, nil); err != nil {
		return nil, err
	}
	rdb := redis.NewClient(cfg.Redis)
	defer rdb.Close()
	prefix := "bench:" + bd.name + ":"
	defer cleanKeys(context.WithoutCancel(ctx), rdb, prefix)
	inp, err := newInproc(bd.store, rdb, prefix, LeaseDefault)
	if err != nil {
		return nil, err
	}
	f := &StorageFigure{PayloadBytes: size, Tasks: int64(n)}
	if f.Before, err = tableFigures(ctx, bd); err != nil {
		return nil, err
	}
	const chunk = 500
	for i := 0; i < n; i += chunk {
		batch := make([]tasks.NewTask, 0, chunk)
		for j := i; j < min(i+chunk, n); j++ {
			batch = append(batch, tasks.NewTask{Category: "cat0", Title: fmt.Sprintf("task %d", j), Payload: jsonOfSize(j, size)})
		}
		if _, err := inp.d.AddTasks(ctx, batch); err != nil {
			return nil, fmt.Errorf("insert: %w", err)
		}
	}
	w, err := newTaskdWorkersWith(inp.d, 16, []string{"cat0"}, worker.HandlerFunc(func(_ context.Context, t *tasks.Task) (any, error) {
		return jsonOfSize(int(t.ID), size), nil
	}))
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	waitErr := func() error {
		deadline := time.Now().Add(10 * time.Minute)
		for {
			var done int64
			if err := bd.db.GetContext(ctx, &done, `SELECT COUNT(*) FROM tasks WHERE status = 'done'`); err != nil {
				return err
			}
			if done == int64(n) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%d of %d tasks done after 10 minutes", done, n)
			}
			sleepCtx(ctx, 100*time.Millisecond)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}()
	f.JobsPerSec = float64(n) / time.Since(start).Seconds()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	failed, first, err := w.stop(sctx)
	if err != nil || waitErr != nil {
		return nil, fmt.Errorf("workers: %w", errors.Join(waitErr, err))
	}
	if failed > 0 {
		return nil, fmt.Errorf("workers: %s", first)
	}
	if f.After, err = tableFigures(ctx, bd); err != nil {
		return nil, err
	}
	return f, nil
}

// jsonOfSize returns a JSON object of size bytes (at least a tiny one) whose
// text does not repeat from one seed to the next.
func jsonOfSize(seed, size int) json.RawMessage {
	head := fmt.Sprintf(`{"n":%d`, seed)
	if size <= len(head)+len(`,"text":""}`) {
		return json.RawMessage(head + "}")
	}
	r := rand.New(rand.NewPCG(uint64(seed), uint64(size)))
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 "
	var b strings.Builder
	b.WriteString(head)
	b.WriteString(`,"text":"`)
	for b.Len() < size-2 {
		b.WriteByte(alphabet[r.IntN(len(alphabet))])
	}
	b.WriteString(`"}`)
	return json.RawMessage(b.String())
}

// WriteStorage prints what MeasureStorage measured.
func WriteStorage(w io.Writer, figs []StorageFigure) {
	for _, f := range figs {
		var parts []string
		for i, a := range f.After {
			b := f.Before[i]
			parts = append(parts, fmt.Sprintf("%s %+d rows %.1f MiB (%.0f B/task)", a.Name, a.Rows-b.Rows,
				float64(a.Bytes-b.Bytes)/(1<<20), float64(a.Bytes-b.Bytes)/float64(f.Tasks)))
		}
		fmt.Fprintf(w, "storage: payload and result of %d B: %d tasks done (%.0f jobs/s): %.0f bytes per task; %s\n",
			f.PayloadBytes, f.Tasks, f.JobsPerSec, f.BytesPerTask(), strings.Join(parts, ", "))
	}
}
