package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// Scenario (m): an application inserts tasks in its own transaction
// (Engine.InsertTx) and commits; nothing else tells taskd. A worker waits
// idle for one category and editors long-poll another over HTTP; each round
// commits one task of each, and measures from the return of the COMMIT to
// the worker's claim and to the editor's answer. The poll interval is the
// default (5s): only the wake-up at the commit answers sooner.

// InsertTxStats is what a run of scenario (m) measured.
type InsertTxStats struct {
	// Rounds is how many transactions committed, one task for the worker
	// and one for an editor in each.
	Rounds int `json:"rounds"`
	// CommitToClaim is, per round, from the return of the caller's COMMIT
	// to the waiting worker's handler starting on the task.
	CommitToClaim Latency `json:"commit_to_claim"`
	// CommitToAnswer is, per round, from the same COMMIT to a long-polling
	// editor's answer holding the task (HTTP, in this process).
	CommitToAnswer Latency `json:"commit_to_answer"`
	// Missed counts rounds whose claim or answer did not come within
	// insertTxRoundMax.
	Missed int `json:"missed"`
}

// Shape of scenario (m).
const (
	// InsertTxRounds is how many transactions commit (a fifth with -quick).
	InsertTxRounds = 200
	// insertTxRoundMax bounds one round's wait for its claim and answer.
	insertTxRoundMax = 10 * time.Second
	// insertTxGap is the pause between rounds, for the worker to be back in
	// its wait.
	insertTxGap = 20 * time.Millisecond
	// insertTxSettle is how long the editors' polls get to park.
	insertTxSettle = time.Second
	// insertTxJobs and insertTxNews are the worker's and the editors'
	// categories.
	insertTxJobs = "ltx-jobs"
	insertTxNews = "ltx-news"
)

// insertTxJob and insertTxArticle are the tasks of a round.
type insertTxJob struct {
	Round int `json:"round"`
}

func (insertTxJob) Category() string { return insertTxJobs }

type insertTxArticle struct {
	Round int `json:"round"`
}

func (insertTxArticle) Category() string { return insertTxNews }

// seenAt is a task seen by the worker or an editor, and when.
type seenAt struct {
	id int64
	at time.Time
}

// runInsertTx runs scenario (m): w.Editors long polls, w.Pool rounds.
func runInsertTx(ctx context.Context, cfg Config, scenario string, w Workload) (_ *Result, err error) {
	bd, err := createDB(ctx, cfg.MySQLDSN, "")
	if err != nil {
		return nil, err
	}
	defer func() {
		if derr := bd.drop(context.WithoutCancel(ctx)); derr != nil && err == nil {
			err = derr
		}
	}()
	prefix := "bench:" + bd.name + ":"
	plain := redis.NewClient(cfg.Redis)
	defer plain.Close()
	defer cleanKeys(context.WithoutCancel(ctx), plain, prefix)

	claimed := make(chan seenAt, 16)
	ecfg := taskd.Config{
		MySQL:      taskd.MySQLConfig{DSN: bd.dsn},
		Redis:      taskd.RedisConfig{Addrs: []string{cfg.Redis.Addr}, Username: cfg.Redis.Username, Password: cfg.Redis.Password, DB: cfg.Redis.DB, KeyPrefix: prefix},
		AdminToken: "bench-" + rand.Text(),
		HTTP:       taskd.HTTPConfig{Addr: "127.0.0.1:0"},
		Worker:     taskd.WorkerConfig{Concurrency: 1},
	}
	e, err := taskd.New(ecfg, taskd.WithLogger(slog.New(slog.DiscardHandler)),
		taskd.WithJobHandler(func(_ context.Context, job *taskd.Job[insertTxJob]) (any, error) {
			claimed <- seenAt{job.ID, time.Now()}
			return nil, nil
		}))
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
	// The application's own handle on the database.
	app, err := sql.Open("mysql", bd.dsn)
	if err != nil {
		return nil, err
	}
	defer app.Close()

	pollCtx, stopPolls := context.WithCancel(ctx)
	defer stopPolls()
	answered := make(chan seenAt, w.Editors)
	pollErr := make(chan error, w.Editors)
	for i := range w.Editors {
		token, hash := tasks.NewToken()
		if _, err := e.CreateEditor(ctx, tasks.CreateEditorParams{Name: fmt.Sprintf("ltx-%d", i), Categories: []string{insertTxNews}, TokenHash: hash}); err != nil {
			return nil, err
		}
		go insertTxPoll(pollCtx, "http://"+e.Addr(), token, answered, pollErr)
	}
	select {
	case <-time.After(insertTxSettle):
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	cfg.progress("%s: %d rounds, a worker waiting and %d editors long-polling", scenario, w.Pool, w.Editors)
	st := &InsertTxStats{Rounds: w.Pool}
	var toClaim, toAnswer []time.Duration
	var errs int64
	var firstErr string
	started := time.Now()
	for round := range w.Pool {
		tx, err := app.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		ids, err := e.InsertManyTx(ctx, tx, []taskd.InsertParams{{Args: insertTxJob{round}}, {Args: insertTxArticle{round}}})
		if err != nil {
			_ = tx.Rollback()
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("round %d: commit: %w", round, err)
		}
		committed := time.Now()
		job, news := false, false
		deadline := time.After(insertTxRoundMax)
		for !job || !news {
			select {
			case c := <-claimed:
				if c.id == ids[0] {
					job = true
					toClaim = append(toClaim, c.at.Sub(committed))
				}
			case a := <-answered:
				if a.id == ids[1] {
					news = true
					toAnswer = append(toAnswer, a.at.Sub(committed))
				}
			case err := <-pollErr:
				errs++
				if firstErr == "" {
					firstErr = err.Error()
				}
			case <-deadline:
				st.Missed++
				job, news = true, true
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		time.Sleep(insertTxGap)
	}
	elapsed := time.Since(started)
	slices.Sort(toClaim)
	slices.Sort(toAnswer)
	st.CommitToClaim, st.CommitToAnswer = summarize(toClaim), summarize(toAnswer)
	r := &Result{Scenario: scenario, Strategy: StrategyTaskd, Workload: w, ElapsedSec: elapsed.Seconds(),
		Errors: errs, FirstError: firstErr, InsertTx: st}
	if r.Memory, err = readMemory("self"); err != nil {
		return nil, err
	}
	cfg.progress("%s: commit to claim p50 %.1fms p99 %.1fms, to answer p50 %.1fms p99 %.1fms, %d missed",
		scenario, st.CommitToClaim.P50Ms, st.CommitToClaim.P99Ms, st.CommitToAnswer.P50Ms, st.CommitToAnswer.P99Ms, st.Missed)
	return r, nil
}

// insertTxPoll long-polls as one editor until it is answered a task, which
// it sends on answered with the time of the answer; a 204 polls again.
func insertTxPoll(ctx context.Context, base, token string, answered chan<- seenAt, failed chan<- error) {
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/assignments/next", strings.NewReader(`{"wait_ms": 60000}`))
		if err != nil {
			failed <- err
			return
		}
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				failed <- err
			}
			return
		}
		at := time.Now()
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case err != nil:
			failed <- err
			return
		case res.StatusCode == http.StatusNoContent:
			continue
		case res.StatusCode != http.StatusOK:
			failed <- fmt.Errorf("next: %s: %s", res.Status, body)
			return
		}
		var a struct {
			Task struct {
				ID int64 `json:"id"`
			} `json:"task"`
		}
		if err := json.Unmarshal(body, &a); err != nil || a.Task.ID == 0 {
			failed <- errors.Join(fmt.Errorf("next: an answer without a task: %s", body), err)
			return
		}
		answered <- seenAt{a.Task.ID, at}
		return
	}
}
