package taskd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// TestTracesFromGoConfig: an engine configured in Go with only
// Telemetry.Traces "stdout" exports its spans, the run of a task that
// failed among them, as config.yaml's defaults would: the unset SampleRatio
// and KeepFailed are theirs, not zero.
//
// Not parallel: the stdout exporter writes to os.Stdout as it was when the
// engine was made, which the test points at a pipe meanwhile.
func TestTracesFromGoConfig(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(); _ = w.Close() })
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	stdout := os.Stdout
	os.Stdout = w
	e := newEngine(t, taskd.Config{Telemetry: taskd.TelemetryConfig{Traces: "stdout"}},
		taskd.WithJobHandler(func(context.Context, *taskd.Job[resize]) (any, error) {
			return nil, errors.New("the image is gone")
		}))
	os.Stdout = stdout

	ctx := t.Context()
	id, err := e.Insert(ctx, resize{Image: "cat.png"}, &taskd.InsertOpts{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if task := ended(t, e, id); task.Status != tasks.StatusDead {
		t.Fatalf("task %d is %s, want dead after its one attempt", id, task.Status)
	}
	if err := e.Stop(ctx); err != nil { // flushes the exporter
		t.Fatal(err)
	}
	_ = w.Close()
	out := <-read

	var runs, failed int
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var span struct {
			Name       string
			Status     struct{ Code string }
			Attributes []struct {
				Key   string
				Value struct{ Value any }
			}
		}
		if err := dec.Decode(&span); err != nil {
			t.Fatalf("stdout is not the exporter's JSON spans: %v\n%.2000s", err, out)
		}
		if span.Name != "worker.run" {
			continue
		}
		for _, a := range span.Attributes {
			if a.Key == "taskd.task.id" && a.Value.Value == float64(id) {
				runs++
				if span.Status.Code == "Error" {
					failed++
				}
			}
		}
	}
	if runs != 1 || failed != 1 {
		t.Errorf("stdout has %d worker.run spans of task %d, %d of them failed; want its one failed run (%d bytes of spans)",
			runs, id, failed, len(out))
	}
}

// TestTelemetryConfigDefaults: an unset SampleRatio and KeepFailed take
// their defaults; a said zero stays.
func TestTelemetryConfigDefaults(t *testing.T) {
	t.Parallel()
	d := taskd.Config{}.WithDefaults().Telemetry
	if *d.SampleRatio != taskd.SampleRatioDefault || *d.KeepFailed != taskd.KeepFailedDefault {
		t.Errorf("unset: sample ratio %v, keep failed %v; want %v and %v", *d.SampleRatio, *d.KeepFailed, taskd.SampleRatioDefault, taskd.KeepFailedDefault)
	}
	d = taskd.Config{Telemetry: taskd.TelemetryConfig{SampleRatio: new(0.0), KeepFailed: new(false)}}.WithDefaults().Telemetry
	if *d.SampleRatio != 0 || *d.KeepFailed {
		t.Errorf("said zero: sample ratio %v, keep failed %v; want 0 and false", *d.SampleRatio, *d.KeepFailed)
	}
	bad := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(h:1)/d"}, Telemetry: taskd.TelemetryConfig{SampleRatio: new(1.5)}}.WithDefaults()
	if err := bad.Validate(); err == nil {
		t.Error("sample ratio 1.5: valid, want an error")
	}
}
