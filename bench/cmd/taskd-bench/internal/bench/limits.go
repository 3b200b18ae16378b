package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/config"
	"github.com/taskd/taskd/tasks"
)

// Scenario (n): worker throughput with limits in flight across processes.
// An engine in this process runs LimitsSlots worker slots with a no-op
// handler; a backlog of Workload.Pool tasks of one category goes in through
// the API (POST /v1/tasks) while the category is paused, then the category
// is resumed and the workers burn the backlog down. Three ways, each in a
// database of its own with the same engine and durability: unlimited; with
// the category's max_in_flight equal to the slots (never binding: the target
// is at least 0.9 of unlimited); and with each task's limit_key one of
// LimitsKeyCount keys, interleaved, under key_limit 1 (no target; River Pro's
// users report limits halving throughput, 33k to 17k jobs an hour).
//
// A taskd without the limits refuses the category's keys (config: unknown
// key) or a task's limit_key (400 unknown field): that way is then reported
// as not run, with the reason, and the unlimited one still runs.

// Ways of scenario (n) (Workload.Limits).
const (
	LimitsNone     = "none"     // no limit
	LimitsCategory = "category" // max_in_flight equal to the slots
	LimitsKeys     = "keys"     // LimitsKeyCount keys of key_limit 1
)

// Shape of scenario (n).
const (
	// LimitsSlots is the engine's worker.concurrency, and the category's
	// max_in_flight in the way LimitsCategory.
	LimitsSlots = 100
	// LimitsKeyCount is how many limit_keys the backlog is spread over,
	// each of key_limit 1, in the way LimitsKeys.
	LimitsKeyCount = 100
	// LimitsPool is the backlog (a fifth with -quick): 400 tasks a key.
	LimitsPool = 40_000
	// limitsCategory is the workers' category.
	limitsCategory = "lim-jobs"
	// limitsInsertBatch is the tasks per POST /v1/tasks.
	limitsInsertBatch = 1000
	// limitsMax bounds the burn-down: a way that has not finished by then
	// is reported with the tasks it did.
	limitsMax = 2 * time.Minute
)

// LimitsStats is what a run of scenario (n) measured.
type LimitsStats struct {
	// Way is LimitsNone, LimitsCategory or LimitsKeys.
	Way string `json:"way"`
	// MaxInFlight and KeyLimit are the category's limits (0: none); Keys
	// the limit_keys the backlog is spread over.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	KeyLimit    int `json:"key_limit,omitempty"`
	Keys        int `json:"keys,omitempty"`
	Slots       int `json:"slots"`
	// Tasks is the backlog burnt down, in BurnSec from the resume of the
	// category to the last task done; Left the tasks not done when the
	// burn-down was stopped at its bound (limitsMax), and BurnSec then the
	// bound.
	Tasks   int     `json:"tasks"`
	BurnSec float64 `json:"burn_s"`
	Left    int     `json:"left,omitempty"`
	// Skipped, when set, says why this way did not run (a taskd without the
	// limits); the other figures are then zero.
	Skipped string `json:"skipped,omitempty"`
}

// limitsConfigYAML is the taskd config's categories section for way.
func limitsConfigYAML(way string) string {
	switch way {
	case LimitsCategory:
		return fmt.Sprintf("categories:\n  - name: %s\n    max_in_flight: %d\n", limitsCategory, LimitsSlots)
	case LimitsKeys:
		return fmt.Sprintf("categories:\n  - name: %s\n    key_limit: 1\n", limitsCategory)
	}
	return ""
}

// errNoLimits is a way of scenario (n) this taskd cannot run.
var errNoLimits = errors.New("this taskd has no limits in flight")

// limitsCategories returns the engine's categories for way, from the YAML a
// taskd config file would hold: config.Parse knows the keys of the taskd it
// is built with, so a taskd without the limits answers errNoLimits.
func limitsCategories(way, dsn string) ([]taskd.CategoryConfig, error) {
	text := limitsConfigYAML(way)
	if text == "" {
		return nil, nil
	}
	env := func(k string) (string, bool) {
		if k == "TASKD_MYSQL_DSN" {
			return dsn, true
		}
		return "", false
	}
	c, err := config.Parse([]byte(text), "limits.yaml", env)
	if err != nil && strings.Contains(err.Error(), "unknown key") {
		return nil, fmt.Errorf("%w: %v", errNoLimits, err)
	}
	if err != nil {
		return nil, err
	}
	return c.Categories, nil
}

// runLimits runs one way of scenario (n).
func runLimits(ctx context.Context, cfg Config, scenario string, w Workload) (_ *Result, err error) {
	st := &LimitsStats{Way: w.Limits, Slots: LimitsSlots, Tasks: w.Pool}
	r := &Result{Scenario: scenario, Strategy: StrategyTaskd, Workload: w, Limits: st}
	switch w.Limits {
	case LimitsCategory:
		st.MaxInFlight = LimitsSlots
	case LimitsKeys:
		st.KeyLimit, st.Keys = 1, LimitsKeyCount
	}
	skip := func(err error) (*Result, error) {
		st.Skipped = err.Error()
		cfg.progress("%s: not run: %v", scenario, err)
		return r, nil
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
	cats, err := limitsCategories(w.Limits, bd.dsn)
	if errors.Is(err, errNoLimits) {
		return skip(err)
	}
	if err != nil {
		return nil, err
	}
	prefix := "bench:" + bd.name + ":"
	plain := redis.NewClient(cfg.Redis)
	defer plain.Close()
	defer cleanKeys(context.WithoutCancel(ctx), plain, prefix)

	var ran atomic.Int64
	token := "bench-" + rand.Text()
	e, err := taskd.New(taskd.Config{
		MySQL:      taskd.MySQLConfig{DSN: bd.dsn},
		Redis:      taskd.RedisConfig{Addrs: []string{cfg.Redis.Addr}, Username: cfg.Redis.Username, Password: cfg.Redis.Password, DB: cfg.Redis.DB, KeyPrefix: prefix},
		AdminToken: token,
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		Worker:     taskd.WorkerConfig{Concurrency: LimitsSlots},
		Categories: cats,
	}, taskd.WithLogger(slog.New(slog.DiscardHandler)),
		taskd.WithHandler(limitsCategory, taskd.HandlerFunc(func(context.Context, *tasks.Task) (any, error) {
			ran.Add(1)
			return map[string]bool{"ok": true}, nil
		})))
	if err != nil {
		return nil, err
	}
	if err := e.Start(ctx); err != nil {
		_ = e.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	defer func() {
		if serr := e.Stop(context.WithoutCancel(ctx)); serr != nil && err == nil {
			err = serr
		}
	}()

	// The backlog, while the workers wait on the paused category.
	if _, _, err := e.PauseCategory(ctx, limitsCategory); err != nil {
		return nil, err
	}
	base := "http://" + e.Addr()
	for from := 0; from < w.Pool; from += limitsInsertBatch {
		batch := make([]map[string]any, 0, limitsInsertBatch)
		for i := from; i < min(w.Pool, from+limitsInsertBatch); i++ {
			t := map[string]any{"category": limitsCategory, "title": fmt.Sprintf("job %d", i), "payload": map[string]int{"n": i}}
			if w.Limits == LimitsKeys {
				t["limit_key"] = fmt.Sprintf("tenant-%03d", i%LimitsKeyCount)
			}
			batch = append(batch, t)
		}
		if err := limitsInsert(ctx, base, token, batch); err != nil {
			if w.Limits == LimitsKeys && strings.Contains(err.Error(), "limit_key") {
				return skip(fmt.Errorf("%w: %v", errNoLimits, err))
			}
			return nil, err
		}
	}

	cfg.progress("%s: %d tasks, %d slots, limits %s", scenario, w.Pool, LimitsSlots, w.Limits)
	cpu0 := processCPU(bd.mysqldPID)
	q0, c0, err := limitsStatus(ctx, bd.db)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if _, err := e.ResumeCategory(ctx, limitsCategory); err != nil {
		return nil, err
	}
	deadline := start.Add(limitsMax)
	done := 0
	for {
		late := time.Now().After(deadline)
		if ran.Load() >= int64(w.Pool) || late {
			if err := bd.db.GetContext(ctx, &done, "SELECT COUNT(*) FROM tasks WHERE status = 'done'"); err != nil {
				return nil, fmt.Errorf("count done tasks: %w", err)
			}
			if done >= w.Pool {
				break
			}
		}
		if late {
			st.Left = w.Pool - done
			r.Errors, r.FirstError = 1, fmt.Sprintf("%d of %d tasks done within %v", done, w.Pool, limitsMax)
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	elapsed := time.Since(start)
	cpu1 := processCPU(bd.mysqldPID)
	q1, c1, err := limitsStatus(ctx, bd.db)
	if err != nil {
		return nil, err
	}
	st.BurnSec = elapsed.Seconds()
	r.ElapsedSec, r.Cycles, r.CyclesPerSec = elapsed.Seconds(), int64(done), float64(done)/elapsed.Seconds()
	r.Assignments = ran.Load()
	if done > 0 {
		r.MySQLPerAssignment = float64(q1-q0) / float64(done)
		r.CommitsPerCycle = float64(c1-c0) / float64(done)
	}
	if cpu0 >= 0 && cpu1 >= 0 && done > 0 {
		r.MySQLCPUMsPerCycle = ptr(float64(cpu1-cpu0) / float64(time.Millisecond) / float64(done))
	}
	if r.Memory, err = readMemory("self"); err != nil {
		return nil, err
	}
	cfg.progress("%s: %.0f jobs/s (%d of %d in %.2fs)", scenario, r.CyclesPerSec, done, w.Pool, elapsed.Seconds())
	return r, nil
}

// limitsStatus returns the server's Questions and Com_commit (SHOW GLOBAL
// STATUS): server-wide, like the CPU, but nothing else of the harness
// writes during a burn-down.
func limitsStatus(ctx context.Context, db *sqlx.DB) (questions, commits int64, err error) {
	var rows []struct {
		Name  string `db:"Variable_name"`
		Value string `db:"Value"`
	}
	if err := db.SelectContext(ctx, &rows, "SHOW GLOBAL STATUS WHERE Variable_name IN ('Questions', 'Com_commit')"); err != nil {
		return 0, 0, fmt.Errorf("read mysql status: %w", err)
	}
	for _, r := range rows {
		v, _ := strconv.ParseInt(r.Value, 10, 64)
		switch strings.ToLower(r.Name) {
		case "questions":
			questions = v
		case "com_commit":
			commits = v
		}
	}
	return questions, commits, nil
}

// limitsInsert posts one batch of tasks to POST /v1/tasks as the admin.
func limitsInsert(ctx context.Context, base, token string, batch []map[string]any) error {
	body, err := json.Marshal(batch)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/tasks", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("insert tasks: %w", err)
	}
	defer res.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusCreated {
		return fmt.Errorf("insert tasks: %s: %s", res.Status, msg)
	}
	return nil
}

// Targets of scenario (n).
const (
	// LimitsCategoryMin is the least category-limited jobs/s, as a ratio
	// to unlimited, when the limit equals the slots (never binding).
	LimitsCategoryMin = 0.9
	// LimitsRiverPro is what River Pro's users report keeping with limits
	// on (17k of 33k jobs an hour): the keys way, which has no target, is
	// printed against it.
	LimitsRiverPro = 17.0 / 33.0
)

// limitsWays are the limited ways of scenario (n), by scenario name.
var limitsWays = []struct {
	scenario, label string
	want            float64
	detail          string
}{
	{"n-limits-" + LimitsCategory, fmt.Sprintf("max_in_flight %d = slots / unlimited", LimitsSlots), LimitsCategoryMin, "not binding"},
	{"n-limits-" + LimitsKeys, fmt.Sprintf("%d keys of key_limit 1 / unlimited", LimitsKeyCount), 0,
		fmt.Sprintf("River Pro users report limits cutting 33k to 17k jobs an hour, %.2fx", LimitsRiverPro)},
}

// limitsRatios are each round's limited jobs/s against its unlimited run.
func limitsRatios(rs []Result) []Ratio {
	var out []Ratio
	for i := range rs {
		r := &rs[i]
		for _, way := range limitsWays {
			if r.Scenario != way.scenario || r.CyclesPerSec == 0 {
				continue
			}
			if base := findRun(rs, "n-limits-"+LimitsNone, r.Run, StrategyTaskd); base != nil && base.CyclesPerSec > 0 {
				out = append(out, newRatio(fmt.Sprintf("n #%d: taskd jobs/s, %s", r.Run, way.label), "jobs/s", r.CyclesPerSec, base.CyclesPerSec, 0, true))
			}
		}
	}
	return out
}

// limitsTargets judge the medians of the per-round ratios (the keys way is
// informational); a way with a target that did not run is not met, with the
// reason.
func limitsTargets(rs []Result) []Target {
	var out []Target
	for _, way := range limitsWays {
		var ratio, nums, dens []float64
		var per []string
		skipped := ""
		for i := range rs {
			r := &rs[i]
			if r.Scenario != way.scenario {
				continue
			}
			if r.Limits != nil && r.Limits.Skipped != "" {
				skipped = r.Limits.Skipped
				continue
			}
			base := findRun(rs, "n-limits-"+LimitsNone, r.Run, StrategyTaskd)
			if base == nil || base.CyclesPerSec == 0 {
				continue
			}
			nums, dens = append(nums, r.CyclesPerSec), append(dens, base.CyclesPerSec)
			ratio = append(ratio, r.CyclesPerSec/base.CyclesPerSec)
			per = append(per, fmt.Sprintf("%.2fx", r.CyclesPerSec/base.CyclesPerSec))
		}
		name := fmt.Sprintf("(n) %d worker slots: jobs/s, %s", LimitsSlots, way.label)
		var t Target
		switch {
		case len(ratio) > 0:
			t = newTarget(name, median(ratio), "x", way.want, true,
				fmt.Sprintf("median of %d: %.0f against %.0f jobs/s; per run %s; %s", len(ratio), median(nums), median(dens), strings.Join(per, " "), way.detail))
		case skipped != "":
			t = newTarget(name, 0, "x", way.want, true, "not run: "+skipped)
		default:
			continue
		}
		if way.want == 0 {
			t.Informational, t.Met = true, true
		}
		out = append(out, t)
	}
	return out
}

// writeLimits prints a run of scenario (n).
func writeLimits(w io.Writer, r Result, l *LimitsStats) {
	if l.Skipped != "" {
		fmt.Fprintf(w, "%s: not run: %s\n", r.Scenario, l.Skipped)
		return
	}
	how := "no limit"
	switch l.Way {
	case LimitsCategory:
		how = fmt.Sprintf("max_in_flight %d", l.MaxInFlight)
	case LimitsKeys:
		how = fmt.Sprintf("%d keys of key_limit %d", l.Keys, l.KeyLimit)
	}
	cpu := "n/a"
	if r.MySQLCPUMsPerCycle != nil {
		cpu = fmt.Sprintf("%.3f ms", *r.MySQLCPUMsPerCycle)
	}
	left := ""
	if l.Left > 0 {
		left = fmt.Sprintf(" (stopped at the bound with %d not done)", l.Left)
	}
	fmt.Fprintf(w, "%s #%d: %d slots, %s: %d tasks burnt down in %.2fs%s, %.0f jobs/s; mysqld CPU per job %s, statements per job %.2f, commits per job %.3f\n",
		r.Scenario, r.Run, l.Slots, how, int64(l.Tasks-l.Left), l.BurnSec, left, r.CyclesPerSec, cpu, r.MySQLPerAssignment, r.CommitsPerCycle)
}
