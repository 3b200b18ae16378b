package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// workflowCategory is one category of the workflow pass (Config.Workflow),
// as the taskd config declares it.
type workflowCategory struct {
	name    string
	stages  []string
	overlap int
	weight  int
	share   int  // percent of the new tasks
	hedge   bool // hedged re-offers on, its tasks due soon (see hedges.go)
}

// workflowCategories are the workflow pass's categories: a desk whose
// stories are edited, then reviewed (approved or sent back); labels, each
// task asking three editors for a label; plain tasks; and rush, a few tasks
// due soon, whose editors of their own often find its pool empty and are
// offered hedges (desk hedges too; see hedges.go).
var workflowCategories = []workflowCategory{
	{name: "desk", stages: []string{"edit", "review"}, overlap: 1, weight: 2, share: 40, hedge: true},
	{name: "labels", overlap: labelsOverlap, weight: 1, share: 25},
	{name: "plain", overlap: 1, weight: 1, share: 30},
	{name: rushCategory, overlap: 1, weight: 1, share: 5, hedge: true},
}

// rushCategory is the category whose editors take no other (workflowEditors).
const rushCategory = "rush"

const (
	// labelsOverlap is how many results a task of "labels" asks for.
	labelsOverlap = 3
	// sendBackHold is every category's send_back_hold in the workflow pass:
	// short, so that a sent-back task whose editor is busy reaches the pool
	// within the drain.
	sendBackHold = 3 * time.Second
	// sendBackPercent is how many reviews send the story back.
	sendBackPercent = 25
	// reviewerEvery: every fifth editor is limited to desk's review stage.
	reviewerEvery = 5
	// awayPercent is how often an editor with claims in hand steps away
	// for a little longer than the hedges' inactive_for.
	awayPercent = 3
)

// labels are the labels editors of "labels" choose from; few, so that some
// groups agree.
var labels = []string{"news", "news", "opinion", "sport"}

// writeWorkflowConfig writes the taskd config.yaml of the workflow pass into
// dir and returns its path.
func writeWorkflowConfig(dir string) (string, error) {
	var b strings.Builder
	b.WriteString("# The chaos workflow pass: staged, overlapped categories under fair share.\n")
	b.WriteString("dispatch:\n  fair_share: true\ncategories:\n")
	for _, c := range workflowCategories {
		fmt.Fprintf(&b, "  - name: %s\n", c.name)
		if len(c.stages) > 0 {
			fmt.Fprintf(&b, "    stages: [%s]\n", strings.Join(c.stages, ", "))
		}
		fmt.Fprintf(&b, "    overlap: %d\n    weight: %d\n    send_back_hold: %s\n", c.overlap, c.weight, sendBackHold)
		if c.name == goldCategory {
			b.WriteString(goldConfig)
		}
		if c.hedge {
			b.WriteString(hedgeConfig)
		}
	}
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		return "", fmt.Errorf("write the taskd config: %w", err)
	}
	return path, nil
}

// dueAt is the due_at of a new task of cat, "" for none: in the workflow
// pass, a hedged category's tasks are due hedgeDueIn from now.
func (h *harness) dueAt(cat string) string {
	if !h.cfg.Workflow {
		return ""
	}
	if c := workflowOf(cat); c == nil || !c.hedge {
		return ""
	}
	return time.Now().Add(hedgeDueIn).UTC().Format(time.RFC3339)
}

// pickWorkflowCategory returns a workflow category by its share.
func pickWorkflowCategory() string {
	roll := rand.IntN(100)
	for _, c := range workflowCategories {
		if roll < c.share {
			return c.name
		}
		roll -= c.share
	}
	return workflowCategories[len(workflowCategories)-1].name
}

func workflowOf(name string) *workflowCategory {
	for i := range workflowCategories {
		if workflowCategories[i].name == name {
			return &workflowCategories[i]
		}
	}
	return nil
}

// workflowEditors creates the workflow pass's editors: each in one category
// and maybe another (rush's in rush alone); every fifth in desk and plain,
// limited to desk's review stage; editor i of capacity 2 when i%4 == 1, 3 when i%4 == 3, else 1.
// Then it asks the API whether a submit takes a decision.
func (h *harness) workflowEditors(ctx context.Context) error {
	for i := range h.cfg.Editors {
		main := workflowCategories[i%len(workflowCategories)].name
		cats := []string{main}
		var stages map[string][]string
		reviewer := i%reviewerEvery == reviewerEvery-1
		if reviewer {
			cats = []string{"desk", "plain"}
			stages = map[string][]string{"desk": {"review"}}
		} else if extra := h.cats[rand.IntN(len(h.cats))]; extra != main && main != rushCategory {
			cats = append(cats, extra)
		}
		capacity := 1
		switch i % 4 {
		case 1:
			capacity = 2
		case 3:
			capacity = 3
		}
		e, err := h.createEditorWith(ctx, fmt.Sprintf("editor-%03d", i), cats, capacity, stages)
		if err != nil {
			return err
		}
		e.reviewOnly = reviewer
		h.editors = append(h.editors, e)
	}
	var err error
	h.decisions, err = h.probeDecisions(ctx, h.editors[0])
	return err
}

// probeDecisions asks whether the API takes a submit's decision and notes:
// a submit of a task that does not exist, with a decision, is refused 400
// when the body's fields are unknown to it, else 404 (nothing changes
// either way). The request is not one of the run's.
func (h *harness) probeDecisions(ctx context.Context, e *editor) (bool, error) {
	body := map[string]any{"fence": 1, "result": map[string]any{"probe": true}, "decision": "approve", "notes": "probe"}
	for range 20 {
		base := h.router.pick()
		resp := call(ctx, e.client, base, "POST", "/v1/assignments/999999999999/submit", e.token, body, h.cfg.RequestBound)
		h.router.done(base)
		switch resp.status {
		case http.StatusBadRequest:
			h.logf("the API refuses a submit's decision (%s): reviewers approve, labels go in the result alone", trimBody(resp.body))
			return false, nil
		case http.StatusNotFound, http.StatusForbidden, http.StatusConflict:
			return true, nil
		case 0, http.StatusServiceUnavailable:
			backoff(ctx)
		default:
			return false, fmt.Errorf("probe a submit with a decision: %d %s", resp.status, trimBody(resp.body))
		}
	}
	return false, fmt.Errorf("probe a submit with a decision: no answer")
}

// workflowStats counts the workflow pass's decisions.
type workflowStats struct {
	sendBacks, approvals, labelled atomic.Int64
}

// runWorkflowEditor runs an editor of the workflow pass until ctx ends. It
// asks for work until it holds its capacity (the server answers a held
// claim once it is there), then works its claims in random order: as
// runEditor does one, except that walking away from a claim holds nothing
// up but that claim's slot.
func (h *harness) runWorkflowEditor(ctx context.Context, e *editor) {
	var held []*assignment
	has := func(a *assignment) bool {
		return slices.ContainsFunc(held, func(b *assignment) bool { return b.Task.ID == a.Task.ID && b.Fence == a.Fence })
	}
	keep := func(a *assignment) bool {
		if a == nil || has(a) || e.walkedAway[claimRef{a.Task.ID, a.Fence}] {
			return false
		}
		held = append(held, a)
		return true
	}
	for ctx.Err() == nil {
		if len(held) < e.capacity && (len(held) == 0 || rand.IntN(2) == 0) {
			// Waiting with claims in hand would let their leases pass.
			wait := time.Duration(0)
			if len(held) == 0 {
				wait = time.Duration(200+rand.IntN(1300)) * time.Millisecond
			}
			a := h.nextAssignmentWait(ctx, e, wait)
			if keep(a) {
				continue
			}
			if len(held) == 0 {
				if a != nil {
					// At capacity with claims it walked away from: their
					// leases pass.
					sleepCtx(ctx, 100*time.Millisecond)
				}
				continue
			}
		}
		if rand.IntN(100) < awayPercent {
			// The editor steps away with its claims in hand, past the
			// hedges' inactive_for but within the lease: its desk claims
			// may be offered to another editor meanwhile (see hedges.go).
			sleepCtx(ctx, hedgeInactiveFor+time.Duration(200+rand.IntN(600))*time.Millisecond)
		}
		i := rand.IntN(len(held))
		cur := held[i]
		held = slices.Delete(held, i, i+1)
		roll := rand.IntN(100)
		m := h.mix
		switch {
		case roll < m.abandon:
			p := h.rec.phase()
			p.abandons.Add(1)
			ref := claimRef{cur.Task.ID, cur.Fence}
			if cur.Hedge {
				e.log.abandonedHedges = append(e.log.abandonedHedges, ref)
			} else {
				e.log.abandoned = append(e.log.abandoned, ref)
			}
			e.walkedAway[ref] = true
		case roll < m.abandon+m.release:
			keep(h.release(ctx, e, cur, false))
		case roll < m.abandon+m.release+m.skip:
			keep(h.release(ctx, e, cur, true))
		case roll < m.abandon+m.release+m.skip+m.heartbeat:
			if h.heartbeat(ctx, e, cur) {
				keep(h.submit(ctx, e, cur))
			}
		default:
			keep(h.submit(ctx, e, cur))
		}
	}
}

// stageOf returns the stage index of a's claim and whether it is known:
// from the assignment when the API gives it (a number, or a name of the
// category's stages), else read from the task's row at the claim's fence.
func (h *harness) stageOf(ctx context.Context, a *assignment) (int, bool) {
	if len(a.Stage) > 0 && string(a.Stage) != "null" {
		var n int
		if json.Unmarshal(a.Stage, &n) == nil {
			return n, true
		}
		var name string
		if json.Unmarshal(a.Stage, &name) == nil {
			if c := workflowOf(a.Task.Category); c != nil {
				if i := slices.Index(c.stages, name); i >= 0 {
					return i, true
				}
			}
		}
	}
	qctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var stage int
	err := h.sql.QueryRowContext(qctx, "SELECT stage FROM tasks WHERE id = ? AND fence = ?", a.Task.ID, a.Fence).Scan(&stage)
	return stage, err == nil
}

// submitBody is the body of the submit of a: in the workflow pass, with a
// reviewer's decision (a quarter sent back, with notes) or an editor's
// label, when the API takes decisions.
func (h *harness) submitBody(ctx context.Context, e *editor, a *assignment) map[string]any {
	result := map[string]any{"editor": e.id, "fence": a.Fence, "ok": true}
	body := map[string]any{"fence": a.Fence, "result": result}
	if !h.cfg.Workflow {
		return body
	}
	switch a.Task.Category {
	case "labels":
		label := labels[rand.IntN(len(labels))]
		result["label"] = label
		if h.decisions {
			body["decision"] = label
		}
	case "desk":
		if !h.decisions {
			break
		}
		if stage, ok := h.stageOf(ctx, a); ok && stage > 0 {
			if rand.IntN(100) < sendBackPercent {
				body["decision"] = "send_back"
				body["notes"] = "chaos: the lede is buried (" + strconv.FormatInt(a.Task.ID, 10) + ")"
			} else {
				body["decision"] = "approve"
			}
		}
	}
	return body
}

// counted counts an acknowledged submit's decision.
func (h *harness) counted(body map[string]any) {
	switch body["decision"] {
	case "send_back":
		h.stats.sendBacks.Add(1)
	case "approve":
		h.stats.approvals.Add(1)
	case nil:
	default:
		h.stats.labelled.Add(1)
	}
}

// workload describes the run's workload for the report.
func (h *harness) workload() string {
	if !h.cfg.Workflow {
		return fmt.Sprintf("default: %d categories, one stage, one result per task, each editor one claim at a time", h.cfg.Categories)
	}
	var cats []string
	for _, c := range workflowCategories {
		s := c.name
		var parts []string
		if len(c.stages) > 0 {
			parts = append(parts, "stages "+strings.Join(c.stages, " → "))
		}
		if c.overlap > 1 {
			parts = append(parts, fmt.Sprintf("overlap %d", c.overlap))
		}
		parts = append(parts, fmt.Sprintf("weight %d", c.weight), fmt.Sprintf("%d%% of tasks", c.share))
		cats = append(cats, s+" ("+strings.Join(parts, ", ")+")")
	}
	capN := map[int]int{}
	reviewers := 0
	for _, e := range h.editors {
		capN[e.capacity]++
		if e.reviewOnly {
			reviewers++
		}
	}
	dec := fmt.Sprintf("reviewers send %d%% back with notes (hold %v)", sendBackPercent, sendBackHold)
	if !h.decisions {
		dec = "the API takes no decisions: reviewers approve by submitting, labels are in the results alone"
	}
	return fmt.Sprintf("workflow: %s; dispatch.fair_share on; editors of capacity 1/2/3: %d/%d/%d, %d limited to desk's review stage; %s",
		strings.Join(cats, ", "), capN[1], capN[2], capN[3], reviewers, dec)
}
