package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// subject is one side of the comparison: a job system over its store, driven
// through its public API.
type subject interface {
	// Name is "River" or "taskd".
	Name() string
	// Reset makes the store empty (River: a truncated job table; taskd: a
	// fresh database) and builds a client with workers slots whose handler
	// does nothing but count its calls. It starts nothing.
	Reset(ctx context.Context, workers int) error
	// Insert adds n no-op jobs in one call of the public batch insert API.
	Insert(ctx context.Context, n int) error
	// Start starts the client's workers; Stop stops them and the client.
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
	// Handled is how many times the handler ran since Reset: a job's run,
	// not yet its durable completion.
	Handled() int64
	// Completed counts the jobs whose completion the store has committed.
	Completed(ctx context.Context) (int64, error)
	// Unfinished counts the jobs neither completed nor given up on.
	Unfinished(ctx context.Context) (int64, error)
	// Failed counts the jobs that ended otherwise than completed (retried,
	// dead, discarded): each one is an error of the run.
	Failed(ctx context.Context) (int64, error)
	// Durability describes the store's commit durability, read from the
	// servers.
	Durability(ctx context.Context) (string, error)
	// Servers are the process ids of the store's servers on this machine
	// (River: the postmaster and its children; taskd: mysqld and
	// redis-server), nil when they are elsewhere.
	Servers(ctx context.Context) []int
	// Logged counts the warnings and errors the side's client logged since
	// Reset, and gives the first.
	Logged() (int64, string)
	// Close drops what Reset made and closes the connections.
	Close(ctx context.Context) error
}

// insertBatch is the batch size of the initial inserts (River's benchmark
// inserts 5,000 at a time too).
const insertBatch = 5_000

// Result is one side's measurement in one run.
type Result struct {
	JobsPerSec float64 `json:"jobs_per_sec"`
	// Jobs is the completions counted, Seconds the time they took: from
	// Start until the last job's completion was committed (burn-down), or
	// the timed window (steady state).
	Jobs    int64   `json:"jobs"`
	Seconds float64 `json:"seconds"`
	// Capped is set when a burn-down did not finish within the cap: Jobs
	// is then what completed by the cap.
	Capped bool `json:"capped,omitempty"`
	// InsertPerSec is the initial insert's rate, through the public API.
	InsertPerSec float64 `json:"insert_jobs_per_sec"`
	// MinBacklog is the fewest jobs waiting that the steady state's
	// producer saw during the window (by its own count): above 0, the
	// workers never waited for the producer.
	MinBacklog *int64 `json:"min_backlog,omitempty"`
	Failed     int64  `json:"failed"`
	// Logged counts the warnings and errors the side logged during the
	// run; FirstLogged is the first of them.
	Logged      int64  `json:"logged,omitempty"`
	FirstLogged string `json:"first_logged,omitempty"`
	// SetupSeconds (reset and the initial insert) and StopSeconds are the
	// harness's own time, outside the measurement.
	SetupSeconds float64 `json:"setup_seconds"`
	StopSeconds  float64 `json:"stop_seconds"`
	// StoreCPUMsPerJob is the CPU time of the store's servers (Servers)
	// over the measured span, per job counted; ClientCPUMsPerJob this
	// process's (the side's client, with the harness's own polling). Nil
	// when a server's /proc could not be read.
	StoreCPUMsPerJob  *float64 `json:"store_cpu_ms_per_job,omitempty"`
	ClientCPUMsPerJob *float64 `json:"client_cpu_ms_per_job,omitempty"`
	// StoreCPUMsPerJobByServer splits StoreCPUMsPerJob by server command
	// name when the store has more than one kind (taskd: mysqld and
	// redis-server).
	StoreCPUMsPerJobByServer map[string]float64 `json:"store_cpu_ms_per_job_by_server,omitempty"`
}

// insertAll inserts n jobs in batches of insertBatch and returns the rate.
func insertAll(ctx context.Context, s subject, n int) (float64, error) {
	start := time.Now()
	for done := 0; done < n; {
		k := min(insertBatch, n-done)
		if err := s.Insert(ctx, k); err != nil {
			return 0, fmt.Errorf("%s: insert: %w", s.Name(), err)
		}
		done += k
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// Polling for the end of a burn-down: the harness watches the handler's
// counter in process, which costs the stores nothing, and asks the store
// only once every job ran, until all their completions are committed.
const (
	handledPoll   = 5 * time.Millisecond
	committedPoll = 5 * time.Millisecond
)

// burnDown inserts jobs, starts workers and measures how long they take to
// complete all of them, durably; past capAfter it counts what completed by
// then instead.
func burnDown(ctx context.Context, s subject, workers, jobs int, capAfter time.Duration) (Result, error) {
	var r Result
	setup := time.Now()
	if err := s.Reset(ctx, workers); err != nil {
		return r, fmt.Errorf("%s: reset: %w", s.Name(), err)
	}
	var err error
	if r.InsertPerSec, err = insertAll(ctx, s, jobs); err != nil {
		return r, err
	}
	cpu0 := sampleCPU(s.Servers(ctx))
	start := time.Now()
	r.SetupSeconds = start.Sub(setup).Seconds()
	if err := s.Start(ctx); err != nil {
		return r, fmt.Errorf("%s: start: %w", s.Name(), err)
	}
	deadline := start.Add(capAfter)
	// A query sees what was committed when it started: end is the start
	// of the query that saw the last completion.
	var end time.Time
	measure := func() (finished bool, err error) {
		for s.Handled() < int64(jobs) && time.Now().Before(deadline) && ctx.Err() == nil {
			time.Sleep(handledPoll)
		}
		for {
			end = time.Now()
			left, err := s.Unfinished(ctx)
			if err != nil || left == 0 {
				return err == nil, err
			}
			if end.After(deadline) || ctx.Err() != nil {
				return false, ctx.Err()
			}
			time.Sleep(committedPoll)
		}
	}
	finished, err := measure()
	cpu1 := sampleCPU(s.Servers(ctx))
	if err == nil && !finished {
		// Capped: the rate is what completed by now.
		end = time.Now()
	}
	if err == nil {
		r.Jobs, err = s.Completed(ctx)
	}
	if err != nil {
		return r, fmt.Errorf("%s: %w", s.Name(), err)
	}
	r.perJob(cpu0, cpu1)
	r.Seconds = end.Sub(start).Seconds()
	r.Capped = !finished
	r.JobsPerSec = float64(r.Jobs) / r.Seconds
	stopping := time.Now()
	if err := s.Stop(ctx); err != nil {
		return r, fmt.Errorf("%s: stop: %w", s.Name(), err)
	}
	r.StopSeconds = time.Since(stopping).Seconds()
	if r.Failed, err = s.Failed(ctx); err != nil {
		return r, fmt.Errorf("%s: %w", s.Name(), err)
	}
	r.Logged, r.FirstLogged = s.Logged()
	return r, nil
}

// Steady is the steady state's producer and window.
type Steady struct {
	// Backlog is how many jobs the producer keeps waiting: whenever fewer
	// than Backlog are inserted and not yet handled, it inserts a Batch.
	Backlog, Batch int
	// Warmup runs before the window opens; Window is the time measured.
	Warmup, Window time.Duration
}

// producerIdle is how long the producer waits when the backlog is full.
const producerIdle = 2 * time.Millisecond

// steady runs workers while a producer keeps a backlog of jobs waiting, and
// measures the completions committed during a window after a warm-up.
func steady(ctx context.Context, s subject, workers int, st Steady) (Result, error) {
	var r Result
	setup := time.Now()
	if err := s.Reset(ctx, workers); err != nil {
		return r, fmt.Errorf("%s: reset: %w", s.Name(), err)
	}
	var err error
	if r.InsertPerSec, err = insertAll(ctx, s, st.Backlog); err != nil {
		return r, err
	}

	pctx, stopProducer := context.WithCancel(ctx)
	defer stopProducer()
	var (
		inserted  atomic.Int64
		minSeen   atomic.Int64 // during the window; -1 before it opens
		windowOn  atomic.Bool
		producing sync.WaitGroup
		perr      error
	)
	inserted.Store(int64(st.Backlog))
	minSeen.Store(-1)
	r.SetupSeconds = time.Since(setup).Seconds()
	producing.Go(func() {
		for pctx.Err() == nil {
			waiting := inserted.Load() - s.Handled()
			if windowOn.Load() {
				if m := minSeen.Load(); m < 0 || waiting < m {
					minSeen.Store(waiting)
				}
			}
			if waiting >= int64(st.Backlog) {
				time.Sleep(producerIdle)
				continue
			}
			if err := s.Insert(pctx, st.Batch); err != nil {
				if pctx.Err() == nil {
					perr = fmt.Errorf("%s: producer: %w", s.Name(), err)
				}
				return
			}
			inserted.Add(int64(st.Batch))
		}
	})

	if err := s.Start(ctx); err != nil {
		return r, fmt.Errorf("%s: start: %w", s.Name(), err)
	}
	sleepCtx(ctx, st.Warmup)
	windowOn.Store(true)
	cpu0 := sampleCPU(s.Servers(ctx))
	// Each count sees what was committed when its query started.
	t0 := time.Now()
	c0, err := s.Completed(ctx)
	if err != nil {
		return r, fmt.Errorf("%s: %w", s.Name(), err)
	}
	sleepCtx(ctx, st.Window-time.Since(t0))
	t1 := time.Now()
	c1, err := s.Completed(ctx)
	cpu1 := sampleCPU(s.Servers(ctx))
	if err != nil {
		return r, fmt.Errorf("%s: %w", s.Name(), err)
	}
	windowOn.Store(false)
	stopProducer()
	producing.Wait()
	if perr != nil {
		return r, perr
	}
	m := minSeen.Load()
	r.MinBacklog = &m
	r.Jobs = c1 - c0
	r.perJob(cpu0, cpu1)
	r.Seconds = t1.Sub(t0).Seconds()
	r.JobsPerSec = float64(r.Jobs) / r.Seconds
	if err := ctx.Err(); err != nil {
		return r, err
	}
	stopping := time.Now()
	if err := s.Stop(ctx); err != nil {
		return r, fmt.Errorf("%s: stop: %w", s.Name(), err)
	}
	r.StopSeconds = time.Since(stopping).Seconds()
	if r.Failed, err = s.Failed(ctx); err != nil {
		return r, fmt.Errorf("%s: %w", s.Name(), err)
	}
	r.Logged, r.FirstLogged = s.Logged()
	return r, nil
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
