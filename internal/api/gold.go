package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/tasks"
)

// GoldStore is what the API reads and writes of gold tasks (see Store). A
// gold task is served to an editor as a copy of its own, claimed in the
// store's transaction that picks it (ClaimGold): the copy is a task like any
// other to the dispatcher, which then heartbeats and releases it as any, and
// only its submit comes here first (SubmitGold), which scores it instead of
// committing a result.
type GoldStore interface {
	ClaimGold(ctx context.Context, p tasks.GoldClaimParams) (*tasks.Claim, error)
	SubmitGold(ctx context.Context, p tasks.SubmitParams, rules func(category string) (tasks.GoldRule, bool)) (*tasks.GoldScored, error)
	MarkGold(ctx context.Context, id int64, a tasks.GoldAnswer, rules func(category string) (tasks.GoldRule, bool)) (*tasks.GoldTask, error)
	GoldAccuracy(ctx context.Context, p tasks.GoldAccuracyParams) ([]tasks.GoldAccuracy, error)
	GoldPauses(ctx context.Context, category string) ([]tasks.GoldPause, error)
	EditorGoldPauses(ctx context.Context, editorID int64) ([]string, error)
	LiftGoldPause(ctx context.Context, editorID int64, category string) (bool, error)
}

// Gold windows of GET /v1/admin/gold.
const (
	GoldWindowDefault = 30 * 24 * time.Hour
	GoldWindowMax     = 366 * 24 * time.Hour
)

// codeTaskHeld refuses to mark gold a task a claim holds.
const codeTaskHeld = "task_held"

// goldRule returns category's gold rule, false when it has none.
func (a *api) goldRule(category string) (tasks.GoldRule, bool) {
	r, ok := a.gold[category]
	return r, ok
}

// goldDraw draws, for a new claim of an editor of cats, the categories whose
// gold tasks it is to be: each category with a rate is drawn with its
// probability. Empty (the usual case, and always without gold rules): an
// ordinary claim. The draw is the whole decision: nothing about it is sent.
func (a *api) goldDraw(cats []string) []string {
	if len(a.gold) == 0 {
		return nil
	}
	var out []string
	for _, c := range cats {
		if r, ok := a.gold[c]; ok && r.Rate > 0 && a.goldFloat() < r.Rate {
			out = append(out, c)
		}
	}
	return out
}

// goldUnpaused returns cats without those the editor is paused from by its
// gold accuracy: one read, only when some category has a floor.
func (a *api) goldUnpaused(ctx context.Context, e *tasks.Editor, cats []string) ([]string, error) {
	if !a.goldFloors || len(cats) == 0 {
		return cats, nil
	}
	paused, err := a.store.EditorGoldPauses(ctx, e.ID)
	if err != nil || len(paused) == 0 {
		return cats, err
	}
	return slices.DeleteFunc(slices.Clone(cats), func(c string) bool { return slices.Contains(paused, c) }), nil
}

// claimGold claims a copy of a gold task of cats for c, or returns nil when
// there is none for it now (or it holds a claim): the caller then claims as
// usual.
func (a *api) claimGold(ctx context.Context, c dispatcher.Claimant, cats []string) (*tasks.Claim, error) {
	claim, err := a.store.ClaimGold(ctx, tasks.GoldClaimParams{EditorID: c.EditorID, Holder: c.Holder, Categories: cats, Lease: a.d.Config().Lease})
	switch {
	case err == nil:
		return claim, nil
	case errors.Is(err, tasks.ErrNotFound), errors.Is(err, tasks.ErrEditorBusy), errors.Is(err, tasks.ErrLimited):
		return nil, nil
	case errors.Is(err, tasks.ErrEditorDisabled):
		return nil, err
	}
	return nil, dispatcher.Unavailable(err)
}

// submitGold submits ref for e when its task is a gold copy: true when it
// was one (the answer is written, or the error is the refusal), false when the
// caller submits it as any other task. A process without gold rules calls it
// only once the ordinary submit was refused: the store refuses a copy's
// ordinary submit, and a copy served before the rules were removed (or by a
// replica that still has them) is scored all the same (by its answer's
// decision or fields), never made a result.
func (a *api) submitGold(w http.ResponseWriter, r *http.Request, e *tasks.Editor, c dispatcher.Claimant, ref dispatcher.ClaimRef, req *submitRequest) (bool, error) {
	scored, err := a.store.SubmitGold(r.Context(), tasks.SubmitParams{TaskID: ref.TaskID, Fence: ref.Fence, Holder: c.Holder,
		Result: req.Result, Decision: req.Decision, Notes: req.Notes}, a.goldRule)
	if errors.Is(err, tasks.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return true, a.refused(r, e, ref, dispatcher.Unavailable(err))
	}
	a.d.ReleaseLock(r.Context(), ref.TaskID, c.Holder)
	a.log.DebugContext(r.Context(), "submitted", "editor_id", e.ID, "task_id", ref.TaskID, "fence", ref.Fence, "decision", req.Decision)
	if scored.Paused != nil {
		a.log.InfoContext(r.Context(), "editor paused by gold accuracy", "editor_id", e.ID, "category", scored.Paused.Category, "reason", scored.Paused.Reason)
		c.Categories = slices.DeleteFunc(slices.Clone(c.Categories), func(cat string) bool { return cat == scored.Paused.Category })
	}
	next, err := a.nextAfterSubmit(r.Context(), c, a.goldDraw(c.Categories))
	if err != nil {
		a.log.WarnContext(r.Context(), "find next assignment after submit", "task_id", ref.TaskID, "fence", ref.Fence, "err", err)
		next = nil
	}
	out, err := a.assignmentOf(r.Context(), next)
	if err != nil {
		return true, err
	}
	a.writeJSON(w, r, http.StatusOK, submitResponse{Next: out})
	return true, nil
}

// nextAfterSubmit is the next claim of c once its submit was committed on
// its own: a gold copy of goldCats when there is one, else as usual.
func (a *api) nextAfterSubmit(ctx context.Context, c dispatcher.Claimant, goldCats []string) (*tasks.Claim, error) {
	if len(goldCats) > 0 {
		claim, err := a.claimGold(ctx, c, goldCats)
		if claim != nil || err != nil {
			return claim, err
		}
	}
	claim, err := a.d.Next(ctx, c, 0)
	if errors.Is(err, dispatcher.ErrNoTask) || errors.Is(err, tasks.ErrEditorDisabled) {
		return nil, nil
	}
	return claim, err
}

type markGoldRequest struct {
	Decision *string          `json:"decision"`
	Result   *json.RawMessage `json:"result"`
}

func (req *markGoldRequest) answer() tasks.GoldAnswer {
	var a tasks.GoldAnswer
	if req.Decision != nil {
		a.Decision = *req.Decision
	}
	if req.Result != nil {
		a.Result = *req.Result
	}
	return a
}

// checkGold checks a gold answer of a new task before its insert: its
// category has a rule the answer fits, and the task asks for one result.
func (a *api) checkGold(t tasks.NewTask, ans tasks.GoldAnswer) error {
	rule, ok := a.goldRule(t.Category)
	if !ok {
		return fmt.Errorf("%w: category %q has no gold rule in the configuration", tasks.ErrInvalid, t.Category)
	}
	if t.Overlap > 1 {
		return fmt.Errorf("%w: a gold task asks for one result, not overlap %d", tasks.ErrInvalid, t.Overlap)
	}
	return rule.CheckAnswer(ans)
}

// goldTaskJSON is a gold task: its task, category and answer.
type goldTaskJSON struct {
	TaskID    int64            `json:"task_id"`
	Category  string           `json:"category"`
	Answer    tasks.GoldAnswer `json:"answer"`
	CreatedAt string           `json:"created_at"`
}

// markGold makes a task gold with the answer in the body (PUT
// /v1/admin/tasks/{id}/gold).
func (a *api) markGold(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var req markGoldRequest
	if err := decode(w, r, &req, false); err != nil {
		return err
	}
	g, err := a.store.MarkGold(r.Context(), id, req.answer(), a.goldRule)
	if errors.Is(err, tasks.ErrGoldHeld) {
		return errorf(http.StatusConflict, codeTaskHeld, "task %d is held by a claim: mark it gold once the claim ended", id)
	}
	if errors.Is(err, tasks.ErrNotFound) {
		return errorf(http.StatusNotFound, codeNotFound, "task %d does not exist", id)
	}
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, goldTaskJSON{TaskID: g.TaskID, Category: g.Category, Answer: g.Answer, CreatedAt: formatTime(g.CreatedAt)})
	return nil
}

// goldAccuracyJSON is one editor's gold answers in a category.
type goldAccuracyJSON struct {
	EditorID   int64   `json:"editor_id"`
	EditorName string  `json:"editor_name"`
	Category   string  `json:"category"`
	Answers    int     `json:"answers"`
	Correct    int     `json:"correct"`
	Accuracy   float64 `json:"accuracy"`
	// Paused is the editor's pause from the category, null when none.
	Paused *goldPauseJSON `json:"paused"`
}

type goldPauseJSON struct {
	EditorID   int64  `json:"editor_id"`
	EditorName string `json:"editor_name"`
	Category   string `json:"category"`
	Reason     string `json:"reason"`
	PausedAt   string `json:"paused_at"`
}

// goldJSON is the answer of GET /v1/admin/gold.
type goldJSON struct {
	Since   string             `json:"since"`
	Editors []goldAccuracyJSON `json:"editors"`
	// Pauses are every pause in force (of the category), answers in the
	// window or not.
	Pauses []goldPauseJSON `json:"pauses"`
}

// goldAccuracy answers with each editor's gold accuracy per category over a
// window, and the pauses in force (GET /v1/admin/gold?category=&window=).
func (a *api) goldAccuracy(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "category", "window")
	if err != nil {
		return err
	}
	window := GoldWindowDefault
	if s := q["window"]; s != "" {
		if window, err = parseWindow(s); err != nil {
			return err
		}
	}
	since := time.Now().Add(-window)
	acc, err := a.store.GoldAccuracy(r.Context(), tasks.GoldAccuracyParams{Category: q["category"], Since: since})
	if err != nil {
		return err
	}
	pauses, err := a.store.GoldPauses(r.Context(), q["category"])
	if err != nil {
		return err
	}
	out := goldJSON{Since: formatTime(since), Editors: make([]goldAccuracyJSON, 0, len(acc)), Pauses: make([]goldPauseJSON, 0, len(pauses))}
	byKey := make(map[string]*goldPauseJSON, len(pauses))
	for _, p := range pauses {
		out.Pauses = append(out.Pauses, goldPauseJSON{EditorID: p.EditorID, EditorName: p.EditorName, Category: p.Category,
			Reason: p.Reason, PausedAt: formatTime(p.PausedAt)})
	}
	for i := range out.Pauses {
		p := &out.Pauses[i]
		byKey[strconv.FormatInt(p.EditorID, 10)+"/"+p.Category] = p
	}
	for _, g := range acc {
		out.Editors = append(out.Editors, goldAccuracyJSON{EditorID: g.EditorID, EditorName: g.EditorName, Category: g.Category,
			Answers: g.Answers, Correct: g.Correct, Accuracy: math.Round(g.Accuracy()*1e4) / 1e4,
			Paused: byKey[strconv.FormatInt(g.EditorID, 10)+"/"+g.Category]})
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// parseWindow reads a window: a Go duration ("36h") or whole days ("7d"),
// from one minute to GoldWindowMax.
func parseWindow(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int64
		n, err = strconv.ParseInt(days, 10, 32)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d < time.Minute || d > GoldWindowMax {
		return 0, errorf(http.StatusUnprocessableEntity, codeInvalid,
			"window must be a duration such as 7d or 36h, from 1m to %dd, not %q", GoldWindowMax/(24*time.Hour), s)
	}
	return d, nil
}

// liftGoldPause lifts an editor's pause from a category (DELETE
// /v1/admin/gold/pauses/{editor}/{category}).
func (a *api) liftGoldPause(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "editor")
	if err != nil {
		return err
	}
	cat := r.PathValue("category")
	if err := tasks.CheckCategory(cat); err != nil {
		return err
	}
	lifted, err := a.store.LiftGoldPause(r.Context(), id, cat)
	if err != nil {
		return err
	}
	if !lifted {
		return errorf(http.StatusNotFound, codeNotFound, "editor %d is not paused from %q", id, cat)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// goldFloat is a uniform draw in [0, 1); tests may replace it.
var goldFloatDefault = rand.Float64
