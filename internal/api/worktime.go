package api

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// Working time (see docs/working-time.md). A client that measures the time
// its editor is present and active on a claim sends it as active_ms: with
// each heartbeat (the figure so far), and with the submit or release that
// ends the claim (the final figure). A heartbeat that carries it is counted,
// in Redis, per claim; the claim's end reads and deletes the count and records
// the figure (the higher of the submit's or release's and the heartbeats'), bounded
// by the claim's wall time and by tasks.ActiveBound of the count. A request
// without active_ms writes and counts nothing: a client that does not measure
// costs nothing more.

//go:embed beatcount.lua
var beatCountLua string

var beatCountScript = redis.NewScript(beatCountLua)

//go:embed beatend.lua
var beatEndLua string

var beatEndScript = redis.NewScript(beatEndLua)

// beatCounterTTL is how long a claim's heartbeat counter outlives its last
// heartbeat: longer than any claim lives without one.
const beatCounterTTL = 24 * time.Hour

// activeField is the active time a claim's write may carry.
type activeField struct {
	// ActiveMS is the time the editor was present and active on the claim
	// so far, as the client measured it: 0..tasks.ActiveMSMax.
	ActiveMS *int64 `json:"active_ms"`
}

// check refuses an active_ms out of range with 422.
func (f activeField) check() error {
	if f.ActiveMS != nil && (*f.ActiveMS < 0 || *f.ActiveMS > tasks.ActiveMSMax) {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "active_ms must be 0..%d milliseconds, not %d", tasks.ActiveMSMax, *f.ActiveMS)
	}
	return nil
}

// beatKey is the key of the heartbeat counter of editor's claim ref. The
// editor is part of it: a hedge has the fence the task's next claim will get,
// so a hedge that ended without a win (its counter left to expire) and that
// next claim, another editor's, name the same (task, fence).
func (a *api) beatKey(editorID int64, ref dispatcher.ClaimRef) string {
	return a.keyPrefix + "beats:" + strconv.FormatInt(ref.TaskID, 10) + ":" + strconv.FormatInt(ref.Fence, 10) + ":" + strconv.FormatInt(editorID, 10)
}

// countBeat counts an accepted heartbeat of e's claim ref that carried
// active time. A count Redis did not take is logged and lost: it only lowers
// the bound.
func (a *api) countBeat(ctx context.Context, e *tasks.Editor, ref dispatcher.ClaimRef, f activeField) {
	if f.ActiveMS == nil || a.beats == nil {
		return
	}
	if err := beatCountScript.Run(ctx, a.beats, []string{a.beatKey(e.ID, ref)}, *f.ActiveMS, beatCounterTTL.Milliseconds()).Err(); err != nil {
		a.log.WarnContext(ctx, "count heartbeat", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
	}
}

// recordTime records the active time of e's claim ref, which ended as
// outcome: the higher of f's figure and the highest its counted heartbeats
// reported; nothing when neither was sent. The write about the claim has committed, so
// a failure here is logged, never answered.
func (a *api) recordTime(ctx context.Context, e *tasks.Editor, ref dispatcher.ClaimRef, outcome tasks.ClaimOutcome, f activeField) {
	var beats, beatMS int64
	counted := false
	if a.beats != nil && a.beatEvery > 0 {
		vs, err := beatEndScript.Run(ctx, a.beats, []string{a.beatKey(e.ID, ref)}).Int64Slice()
		switch {
		case err != nil:
			// No count: the claim's wall time alone bounds the figure.
			a.log.WarnContext(ctx, "read heartbeat count", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
		case len(vs) == 2:
			beats, beatMS, counted = vs[0], vs[1], true
		}
	}
	// The higher of the two: a page loaded again while it held the claim
	// counts from 0 again, its heartbeats' figure kept the time before.
	reported := beatMS
	switch {
	case f.ActiveMS != nil:
		reported = max(*f.ActiveMS, beatMS)
	case beats == 0:
		return // nothing measured
	}
	p := tasks.ClaimTimeParams{TaskID: ref.TaskID, Fence: ref.Fence, EditorID: e.ID, Outcome: outcome,
		Reported: time.Duration(reported) * time.Millisecond}
	if counted {
		p.Beats, p.Bound = beats, tasks.ActiveBound(beats, a.beatEvery)
	}
	kept, err := a.store.RecordClaimTime(ctx, p)
	if err != nil {
		a.log.WarnContext(ctx, "record claim time", "editor_id", e.ID, "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
		return
	}
	if kept != nil {
		a.active.Add(ctx, kept.Active.Seconds(), metric.WithAttributes(attrCategory.String(kept.Category)))
	}
}

// attrCategory is the category attribute of the API's metrics, as the
// dispatcher's.
const attrCategory = attribute.Key("taskd.task.category")

// newActiveCounter makes taskd.editor.active (Prometheus:
// taskd_editor_active_seconds_total): the active time kept of the editors'
// claims, as recorded in claim_time, per category. Per category only: an
// editor's own figures are in the API, not in a label.
func newActiveCounter(mp metric.MeterProvider) (metric.Float64Counter, error) {
	c, err := mp.Meter(instrumentationName).Float64Counter("taskd.editor.active", metric.WithUnit("s"),
		metric.WithDescription("Active time of the editors' ended claims as kept in the working time, per category."))
	if err != nil {
		return nil, fmt.Errorf("metric instruments: %w", err)
	}
	return c, nil
}

// workingTimeJSON is an editor's working time (see tasks.WorkingTime).
type workingTimeJSON struct {
	EditorID   int64                `json:"editor_id"`
	Days       int                  `json:"days"`
	Since      string               `json:"since"`
	Total      workingFiguresJSON   `json:"total"`
	Categories []categoryTimeJSON   `json:"categories"`
	Daily      []dayWorkingTimeJSON `json:"daily"`
}

// workingFiguresJSON are the figures of a set of measured claims.
type workingFiguresJSON struct {
	ActiveMS  int64 `json:"active_ms"`
	Submitted int   `json:"submitted"`
	Released  int   `json:"released"`
	Reviewed  int   `json:"reviewed"`
	SentBack  int   `json:"sent_back"`
	// TasksPerActiveHour and SendBackRate are null without active time or
	// reviewed submits.
	TasksPerActiveHour *float64 `json:"tasks_per_active_hour"`
	SendBackRate       *float64 `json:"send_back_rate"`
	// GoldAccuracy is null until gold tasks are scored.
	GoldAccuracy *float64 `json:"gold_accuracy"`
}

type categoryTimeJSON struct {
	Category string `json:"category"`
	workingFiguresJSON
	Stages []stageTimeJSON `json:"stages"`
}

type stageTimeJSON struct {
	Stage          int     `json:"stage"`
	StageName      *string `json:"stage_name"`
	Submitted      int     `json:"submitted"`
	MedianActiveMS int64   `json:"median_active_ms"`
}

type dayWorkingTimeJSON struct {
	Day       string `json:"day"`
	ActiveMS  int64  `json:"active_ms"`
	Submitted int    `json:"submitted"`
}

// round3 rounds x to three decimals.
func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

func figuresOf(f tasks.WorkingFigures) workingFiguresJSON {
	out := workingFiguresJSON{ActiveMS: f.Active.Milliseconds(), Submitted: f.Submitted, Released: f.Released,
		Reviewed: f.Reviewed, SentBack: f.SentBack, GoldAccuracy: f.GoldAccuracy}
	if v, ok := f.TasksPerActiveHour(); ok {
		v = round3(v)
		out.TasksPerActiveHour = &v
	}
	if v, ok := f.SendBackRate(); ok {
		v = round3(v)
		out.SendBackRate = &v
	}
	return out
}

func workingTimeOf(editorID int64, wt *tasks.WorkingTime) workingTimeJSON {
	out := workingTimeJSON{EditorID: editorID, Days: wt.Days, Since: formatTime(wt.Since), Total: figuresOf(wt.Total),
		Categories: []categoryTimeJSON{}, Daily: []dayWorkingTimeJSON{}}
	for _, c := range wt.Categories {
		cj := categoryTimeJSON{Category: c.Category, workingFiguresJSON: figuresOf(c.WorkingFigures), Stages: []stageTimeJSON{}}
		for _, s := range c.Stages {
			cj.Stages = append(cj.Stages, stageTimeJSON{Stage: s.Stage, StageName: orNull(s.StageName), Submitted: s.Submitted,
				MedianActiveMS: s.Median.Milliseconds()})
		}
		out.Categories = append(out.Categories, cj)
	}
	for _, d := range wt.Daily {
		out.Daily = append(out.Daily, dayWorkingTimeJSON{Day: d.Day.UTC().Format(time.DateOnly), ActiveMS: d.Active.Milliseconds(), Submitted: d.Submitted})
	}
	return out
}

// workingTime reads editor id's working time over the days r's query asks
// for (days, default tasks.WorkingTimeDaysDefault).
func (a *api) workingTime(r *http.Request, id int64) (*workingTimeJSON, error) {
	q, err := query(r, "days")
	if err != nil {
		return nil, err
	}
	days, err := positiveParam(q["days"], "days", tasks.WorkingTimeDaysMax)
	if err != nil {
		return nil, err
	}
	if _, ok := q["days"]; ok && q["days"] == "" {
		return nil, errorf(http.StatusUnprocessableEntity, codeInvalid, "days must be an integer 1..%d, not empty", tasks.WorkingTimeDaysMax)
	}
	if days == 0 {
		days = tasks.WorkingTimeDaysDefault
	}
	wt, err := a.store.WorkingTime(r.Context(), id, int(days))
	if err != nil {
		return nil, fmt.Errorf("working time: %w", err)
	}
	out := workingTimeOf(id, wt)
	return &out, nil
}

// editorTime answers an admin with an editor's working time.
func (a *api) editorTime(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if _, err := a.store.GetEditorSummary(r.Context(), id); err != nil {
		return editorNotFound(err, id)
	}
	out, err := a.workingTime(r, id)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// myTime answers an editor with its own working time.
func (a *api) myTime(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	out, err := a.workingTime(r, e.ID)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}
