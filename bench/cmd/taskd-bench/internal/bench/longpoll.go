package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Scenario (i): many editors long-poll one `taskd serve` on an empty pool,
// then tasks are inserted through the API; every editor must be answered,
// soon after the batch holding its task was acknowledged.

// LongPollStats is what a run of scenario (i) measured.
type LongPollStats struct {
	// Editors long-polled; Tasks were inserted in Batches requests to POST
	// /v1/tasks, one after the other.
	Editors int `json:"editors"`
	Tasks   int `json:"tasks"`
	Batches int `json:"batches"`
	// SettleSec is how long the run waited, after the last poll was
	// written, for taskd serve to take them all in (its CPU went quiet).
	SettleSec float64 `json:"settle_s"`
	// IdleSec is the window, after the settle, over which IdleCores was
	// measured: every poll parked, no work, nothing sent. IdleCores is the
	// taskd serve child's CPU time (user and system, /proc) over that
	// window divided by it: the cost of holding the polls, in cores.
	IdleSec   float64 `json:"idle_s"`
	IdleCores float64 `json:"idle_cores"`
	// InsertSec is from the first insert sent to the last acknowledged.
	InsertSec float64 `json:"insert_s"`
	// Answered counts editors answered with a task; NoContent the 204
	// answers (a wait that ran out), each followed by another poll.
	Answered  int64 `json:"answered"`
	NoContent int64 `json:"no_content"`
	// InsertToAnswer is, per answered editor, from the acknowledgement of
	// the insert batch holding its task to the answer (0 when the answer
	// came first).
	InsertToAnswer Latency `json:"insert_to_answer"`
	// FDLimit is the RLIMIT_NOFILE this process set for itself and the
	// child.
	FDLimit uint64 `json:"fd_limit"`
	// MemoryLimitMiB is the child's memory_limit_mib, as docs/deployment.md
	// recommends for this many long polls (see longPollMemoryLimit).
	MemoryLimitMiB int `json:"memory_limit_mib"`
}

// longPollMemoryLimit is the memory_limit_mib docs/deployment.md recommends
// for a process holding editors long polls: 100 MiB plus 32 KiB per poll.
func longPollMemoryLimit(editors int) int {
	return 100 + (editors*32+1023)/1024
}

// Shape of scenario (i).
const (
	// LongPollEditors is how many editors long-poll (a tenth with -quick);
	// twice as many tasks are inserted.
	LongPollEditors = 10_000
	longPollBatches = 20
	// longPollWait is the wait_ms each poll asks for: the default
	// http.max_wait, so that no poll runs out while the run sets up.
	longPollWait = time.Minute
	// fdHeadroom is the open files needed besides one per editor: the
	// stores' connections, the binary, logs.
	fdHeadroom = 1024
	// longPollDialing is how many polls may be on their way in at once.
	longPollDialing = 256
	// longPollSetup bounds each setup step: creating the editors, writing
	// the polls; longPollSettle bounds the wait for the child to go quiet;
	// longPollAnswers bounds the wait for the answers after the last insert.
	longPollSetup   = 2 * time.Minute
	longPollSettle  = 30 * time.Second
	longPollAnswers = time.Minute
	// longPollIdle is the window over which the child's CPU is measured
	// with every poll parked and no work: three poll intervals (the
	// default dispatcher.poll_interval, 5s). A tenth of it with -quick.
	longPollIdle = 15 * time.Second
)

// raiseFDLimit sets this process's RLIMIT_NOFILE to its hard limit and
// returns it; the taskd serve child started afterwards inherits it. (Go
// raises its own soft limit at start, but gives a child the limit it was
// started with unless the program sets the limit itself, as here.) It fails
// when the hard limit is below need.
func raiseFDLimit(need uint64) (uint64, error) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("read RLIMIT_NOFILE: %w", err)
	}
	if l.Max < need {
		return 0, fmt.Errorf("scenario (i) needs %d open files in this process and in taskd serve, but the hard limit (RLIMIT_NOFILE) is %d: "+
			"raise it (ulimit -Hn as root, LimitNOFILE= in a systemd unit, nofile in /etc/security/limits.conf, docker run --ulimit nofile=N:N) or run fewer editors",
			need, l.Max)
	}
	l.Cur = l.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, fmt.Errorf("raise RLIMIT_NOFILE to %d: %w", l.Max, err)
	}
	return l.Cur, nil
}

// answer is an editor's assignment and when it arrived.
type answer struct {
	task int64
	at   time.Time
}

// runLongPoll runs scenario (i): w.Editors editors of one category, each
// long-polling POST /v1/assignments/next on an empty pool; once every poll
// is in, w.Pool tasks inserted in longPollBatches batches through POST
// /v1/tasks.
func runLongPoll(ctx context.Context, cfg Config, scenario string, w Workload) (_ *Result, err error) {
	limit, err := raiseFDLimit(uint64(w.Editors) + fdHeadroom)
	if err != nil {
		return nil, err
	}
	bd, err := createDB(ctx, cfg.MySQLDSN, "")
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := bd.drop(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	plain := redis.NewClient(cfg.Redis)
	defer plain.Close()
	prefix := "bench:" + bd.name + ":"
	defer cleanKeys(context.WithoutCancel(ctx), plain, prefix)
	memLimit := longPollMemoryLimit(w.Editors)
	env := append(slices.Clone(cfg.ServeEnv), "TASKD_MYSQL_DSN="+bd.dsn, "TASKD_REDIS_KEY_PREFIX="+prefix,
		"TASKD_MEMORY_LIMIT_MIB="+strconv.Itoa(memLimit))
	hs, err := startServe(ctx, cfg.Binary, env, w.Lease, 64)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := hs.close(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()

	made := time.Now()
	eds, err := longPollEditors(ctx, hs, w.Editors)
	if err != nil {
		return nil, err
	}
	cfg.progress("%s: %d editors made in %s (RLIMIT_NOFILE %d)", scenario, len(eds), time.Since(made).Round(time.Millisecond), limit)

	st := &LongPollStats{Editors: w.Editors, Tasks: w.Pool, Batches: longPollBatches, FDLimit: limit, MemoryLimitMiB: memLimit}
	var (
		errCnt    atomic.Int64
		firstErr  sync.Once
		firstText string
		written   atomic.Int64
		allIn     = make(chan struct{})
		answers   = make([]answer, len(eds))
		noContent atomic.Int64
		wg        sync.WaitGroup
	)
	fail := func(err error) {
		errCnt.Add(1)
		firstErr.Do(func() { firstText = err.Error() })
	}
	// The polls' own client: one connection per editor, no timeout but the
	// run's.
	pc := &http.Client{Transport: &http.Transport{
		MaxIdleConns: len(eds), MaxIdleConnsPerHost: len(eds), IdleConnTimeout: time.Minute, DisableCompression: true,
	}}
	defer pc.CloseIdleConnections()
	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	body, _ := json.Marshal(map[string]any{"wait_ms": longPollWait.Milliseconds()})
	// Connections are opened longPollDialing at a time, so that the
	// server's listen backlog does not overflow (a dropped SYN is sent again
	// only after a second or more).
	dialing := make(chan struct{}, longPollDialing)
	for i, e := range eds {
		wg.Go(func() {
			var once sync.Once
			held := false // a place in dialing
			in := func() {
				once.Do(func() {
					if held {
						<-dialing
					}
					if written.Add(1) == int64(len(eds)) {
						close(allIn)
					}
				})
			}
			defer in() // a poll that failed before it was written counts as in
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { in() }}
			select {
			case dialing <- struct{}{}:
				held = true
			case <-pollCtx.Done():
				return
			}
			for pollCtx.Err() == nil {
				a, err := longPoll(httptrace.WithClientTrace(pollCtx, trace), pc, hs.base, e.token, body)
				switch {
				case errors.Is(err, errNoTask):
					noContent.Add(1)
					continue
				case err != nil:
					if pollCtx.Err() == nil {
						fail(err)
					}
					return
				}
				answers[i] = a
				return
			}
		})
	}
	sent := time.Now()
	select {
	case <-allIn:
	case <-time.After(longPollSetup):
		stopPolls()
		wg.Wait()
		return nil, fmt.Errorf("%d of %d polls written after %s", written.Load(), len(eds), longPollSetup)
	case <-ctx.Done():
		stopPolls()
		wg.Wait()
		return nil, ctx.Err()
	}
	settled := time.Now()
	settle(ctx, hs.cmd.Process.Pid)
	st.SettleSec = time.Since(settled).Seconds()
	idle := longPollIdle
	if w.Editors < LongPollEditors {
		idle /= 10
	}
	cfg.progress("%s: %d polls written in %s, taskd serve quiet after %.1fs more; measuring its CPU over %s idle", scenario, len(eds),
		settled.Sub(sent).Round(time.Millisecond), st.SettleSec, idle)
	st.IdleSec, st.IdleCores = idleCPU(ctx, hs.cmd.Process.Pid, idle)
	cfg.progress("%s: %.4f of a core over %.1fs idle with every poll parked; inserting %d tasks", scenario, st.IdleCores, st.IdleSec, w.Pool)

	// The inserts, one batch after the other; each batch's acknowledgement
	// is when its tasks' waits start.
	batchOf := make(map[int64]int, w.Pool)
	acked := make([]time.Time, 0, longPollBatches)
	first := time.Now()
	for b := range longPollBatches {
		n := w.Pool/longPollBatches + btoi(b < w.Pool%longPollBatches)
		if n == 0 {
			continue
		}
		ids, err := insertBatch(ctx, hs, b, n)
		if err != nil {
			fail(err)
			break
		}
		acked = append(acked, time.Now())
		for _, id := range ids {
			batchOf[id] = len(acked) - 1
		}
	}
	last := time.Now()
	st.InsertSec = last.Sub(first).Seconds()

	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(longPollAnswers):
	case <-ctx.Done():
	}
	stopPolls()
	<-done
	mem, merr := hs.memory()
	if merr != nil {
		return nil, merr
	}

	var lat []time.Duration
	seen := make(map[int64]bool, len(eds))
	end := first
	for _, a := range answers {
		if a.task == 0 {
			continue
		}
		st.Answered++
		end = later(end, a.at)
		if seen[a.task] {
			fail(fmt.Errorf("task %d handed to two editors", a.task))
		}
		seen[a.task] = true
		b, ok := batchOf[a.task]
		if !ok {
			fail(fmt.Errorf("an editor got task %d, not one this run inserted", a.task))
			continue
		}
		lat = append(lat, max(a.at.Sub(acked[b]), 0))
	}
	slices.Sort(lat)
	st.InsertToAnswer = summarize(lat)
	st.NoContent = noContent.Load()
	if want := int64(min(w.Editors, w.Pool)); st.Answered < want && errCnt.Load() == 0 {
		fail(fmt.Errorf("%d of %d editors answered within %s of the last insert", st.Answered, want, longPollAnswers))
	}
	r := &Result{
		Scenario: scenario, Strategy: StrategyTaskd, Workload: w,
		ElapsedSec: end.Sub(first).Seconds(), Assignments: st.Answered,
		Errors: errCnt.Load(), FirstError: firstText, Memory: mem, LongPoll: st,
	}
	cfg.progress("%s: %d of %d editors answered, insert to answer p50 %.0fms p99 %.0fms, peak RSS %.0f MiB, %d errors", scenario,
		st.Answered, w.Editors, st.InsertToAnswer.P50Ms, st.InsertToAnswer.P99Ms, float64(mem.HWMKiB)/1024, r.Errors)
	return r, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// longPollEditors creates n editors of category cat0 through the API, a few
// at a time.
func longPollEditors(ctx context.Context, hs *httpStrategy, n int) ([]*editor, error) {
	ctx, cancel := context.WithTimeout(ctx, longPollSetup)
	defer cancel()
	eds := make([]*editor, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 32 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				e, err := hs.newEditor(ctx, "poll-"+strconv.Itoa(i), []string{"cat0"})
				if err != nil {
					select {
					case errs <- fmt.Errorf("create editor %d: %w", i, err):
					default:
					}
					cancel()
					return
				}
				eds[i] = e
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return nil, err
	default:
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("create %d editors: %w", n, err)
	}
	return eds, nil
}

// longPoll sends one POST /v1/assignments/next with body; it returns
// errNoTask for a 204.
func longPoll(ctx context.Context, c *http.Client, base, token string, body []byte) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/assignments/next", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return answer{}, fmt.Errorf("long poll: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	at := time.Now()
	if err != nil {
		return answer{}, fmt.Errorf("long poll: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusNoContent:
		return answer{}, errNoTask
	case http.StatusOK:
		var a assignmentJSON
		if err := json.Unmarshal(data, &a); err != nil {
			return answer{}, fmt.Errorf("long poll: decode: %w", err)
		}
		return answer{task: a.Task.ID, at: at}, nil
	}
	return answer{}, fmt.Errorf("long poll: %s: %s", resp.Status, bytes.TrimSpace(data))
}

// insertBatch adds n tasks of cat0 with POST /v1/tasks and returns their ids.
func insertBatch(ctx context.Context, hs *httpStrategy, b, n int) ([]int64, error) {
	ts := make([]map[string]any, n)
	for i := range ts {
		ts[i] = map[string]any{"category": "cat0", "title": fmt.Sprintf("i-%d-%d", b, i)}
	}
	var out struct {
		IDs []int64 `json:"ids"`
	}
	if _, err := hs.call(ctx, "/v1/tasks", hs.admin, ts, &out); err != nil {
		return nil, fmt.Errorf("insert batch %d: %w", b, err)
	}
	if len(out.IDs) != n {
		return nil, fmt.Errorf("insert batch %d: %d ids for %d tasks", b, len(out.IDs), n)
	}
	return out.IDs, nil
}

// idleCPU measures process pid's CPU time over window (less if ctx ends)
// and returns the window's length in seconds and the CPU time in cores
// (CPU seconds per second); -1 cores when /proc could not be read.
func idleCPU(ctx context.Context, pid int, window time.Duration) (sec, cores float64) {
	start, c0 := time.Now(), processCPU(pid)
	select {
	case <-time.After(window):
	case <-ctx.Done():
	}
	el, c1 := time.Since(start), processCPU(pid)
	if c0 < 0 || c1 < 0 || el <= 0 {
		return el.Seconds(), -1
	}
	return el.Seconds(), (c1 - c0).Seconds() / el.Seconds()
}

// settle waits until process pid uses less than a tenth of a core over a
// quarter of a second, or longPollSettle passed.
func settle(ctx context.Context, pid int) {
	const step = 250 * time.Millisecond
	deadline := time.Now().Add(longPollSettle)
	prev := processCPU(pid)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		select {
		case <-time.After(step):
		case <-ctx.Done():
			return
		}
		cur := processCPU(pid)
		if prev < 0 || cur < 0 || cur-prev < step/10 {
			return
		}
		prev = cur
	}
}
