package delivery_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/dispatcher/webhook"
	"github.com/taskd/taskd/internal/delivery"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// workflowKeys are the keys of an event's data that only tasks with stages or
// a group, or submits with a decision or notes, have.
var workflowKeys = []string{"stage", "decision", "notes", "task_status", "next_stage", "group_id", "overlap"}

// dataKeys returns the keys of the data of an event's body.
func dataKeys(t *testing.T, body []byte) []string {
	t.Helper()
	var ev struct {
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	var keys []string
	for k := range ev.Data {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestEventJSONOfATaskWithoutWorkflow pins the body of a plain task's events:
// the same bytes as before tasks had stages and groups.
func TestEventJSONOfATaskWithoutWorkflow(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 23, 16, 4, 5, 678e6, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		ev   tasks.OutboxEvent
		want string
	}{
		{tasks.OutboxEvent{ID: 1042, Kind: tasks.WebhookSubmitted, TaskID: 7, Category: "news", Fence: 3, Holder: "editor:12", EditorID: 12,
			Cause: tasks.WebhookSubmit, CreatedAt: at, Result: json.RawMessage(`{"verdict":"ok"}`)},
			`{"id":1042,"type":"submitted","created_at":"2026-11-23T15:04:05.678Z","data":{"task_id":7,"category":"news","fence":3,` +
				`"holder":"editor:12","editor_id":12,"cause":"submit","result":{"verdict":"ok"}}}`},
		{tasks.OutboxEvent{ID: 1043, Kind: tasks.WebhookReleased, TaskID: 8, Category: "news", Key: "cms-8", Fence: 1, Holder: "w1",
			Cause: tasks.WebhookRelease, Detail: "later", CreatedAt: at},
			`{"id":1043,"type":"released","created_at":"2026-11-23T15:04:05.678Z","data":{"task_id":8,"category":"news","key":"cms-8",` +
				`"fence":1,"holder":"w1","cause":"release","detail":"later"}}`},
	} {
		body, err := json.Marshal(delivery.EventJSON(c.ev))
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != c.want {
			t.Errorf("body of %+v:\n got %s\nwant %s", c.ev, body, c.want)
		}
	}
}

// TestEventJSONOfAWorkflow checks the workflow's fields of a body: the stage,
// decision and next stage of a submit at a stage, the group of a grouped
// task's events, and the task's status after the submit.
func TestEventJSONOfAWorkflow(t *testing.T) {
	t.Parallel()
	base := tasks.OutboxEvent{ID: 1, Kind: tasks.WebhookSubmitted, TaskID: 7, Category: "desk", Fence: 2, Cause: tasks.WebhookSubmit}
	for _, c := range []struct {
		name string
		set  func(*tasks.OutboxEvent)
		want webhook.Data
	}{
		{"edit", func(ev *tasks.OutboxEvent) { ev.StageName, ev.NextStage = "edit", "review" },
			webhook.Data{Stage: "edit", TaskStatus: webhook.StatusPending, NextStage: "review"}},
		{"send back", func(ev *tasks.OutboxEvent) {
			ev.StageName, ev.Decision, ev.Notes, ev.NextStage = "review", tasks.DecisionSendBack, "fix the lede", "edit"
		}, webhook.Data{Stage: "review", Decision: webhook.DecisionSendBack, Notes: "fix the lede", TaskStatus: webhook.StatusPending, NextStage: "edit"}},
		{"approve", func(ev *tasks.OutboxEvent) { ev.StageName, ev.Decision = "review", tasks.DecisionApprove },
			webhook.Data{Stage: "review", Decision: webhook.DecisionApprove, TaskStatus: webhook.StatusDone}},
		{"grouped", func(ev *tasks.OutboxEvent) { ev.GroupID, ev.Overlap, ev.Decision = 5, 3, "yes" },
			webhook.Data{Decision: "yes", GroupID: 5, Overlap: 3}},
		{"grouped release", func(ev *tasks.OutboxEvent) {
			ev.Kind, ev.Cause, ev.GroupID, ev.Overlap = tasks.WebhookReleased, tasks.WebhookRelease, 5, 3
		},
			webhook.Data{GroupID: 5, Overlap: 3}},
	} {
		ev := base
		c.set(&ev)
		got := delivery.EventJSON(ev).Data
		if got.Stage != c.want.Stage || got.Decision != c.want.Decision || got.Notes != c.want.Notes || got.TaskStatus != c.want.TaskStatus ||
			got.NextStage != c.want.NextStage || got.GroupID != c.want.GroupID || got.Overlap != c.want.Overlap {
			t.Errorf("%s: data %+v, want %+v", c.name, got, c.want)
		}
	}
	// The receiver's package names the values taskd uses, without importing it.
	if webhook.DecisionApprove != tasks.DecisionApprove || webhook.DecisionSendBack != tasks.DecisionSendBack ||
		webhook.StatusDone != string(tasks.StatusDone) || webhook.StatusPending != string(tasks.StatusPending) {
		t.Error("package webhook's decisions or statuses differ from package tasks'")
	}
}

// TestDelivererCarriesStages: a task with the stages edit and review, edited,
// sent back, edited again and approved, makes four submitted events, each
// with the stage it was submitted at, its decision and where the task went;
// a plain task's event has none of the workflow's keys.
func TestDelivererCarriesStages(t *testing.T) {
	t.Parallel()
	wf := map[string]tasks.Workflow{"desk": {Stages: []string{"edit", "review"}, SendBackHold: time.Hour}}
	b := setup(t, setupOpts{
		Store:      store.Config{WebhookEvents: []tasks.WebhookEvent{tasks.WebhookSubmitted}, Workflows: wf},
		Dispatcher: dispatcher.Config{Workflows: wf},
	})
	rc := newReceiver(t, func(*http.Request, webhook.Event) int { return http.StatusOK })
	ann, bob, cat := b.Editor(t, "ann", "desk"), b.Editor(t, "bob", "desk"), b.Editor(t, "cat", "news")
	story := b.Add(t, "desk", 0, 1)[0]
	plain := b.Add(t, "news", 0, 1)[0]

	steps := []struct {
		ed                  dispatcher.Claimant
		decision, notes     string
		stage, status, next string
	}{
		{ann, "", "", "edit", webhook.StatusPending, "review"},
		{bob, tasks.DecisionSendBack, "fix the lede", "review", webhook.StatusPending, "edit"},
		{ann, tasks.DecisionApprove, "", "edit", webhook.StatusPending, "review"},
		{bob, tasks.DecisionApprove, "fine", "review", webhook.StatusDone, ""},
	}
	fences := make([]int64, len(steps))
	for i, s := range steps {
		c, err := b.D.Next(t.Context(), s.ed, 0)
		if err != nil || c.Task.ID != story {
			t.Fatalf("step %d: next: %v, %v; want task %d", i, c, err, story)
		}
		fences[i] = c.Fence
		_, err = b.D.SubmitWith(t.Context(), s.ed, dispatcher.ClaimRef{TaskID: story, Fence: c.Fence},
			dispatcher.Submission{Result: json.RawMessage(`{"step":` + strconv.Itoa(i) + `}`), Decision: s.decision, Notes: s.notes})
		if err != nil {
			t.Fatalf("step %d: submit at %s: %v", i, s.stage, err)
		}
	}
	c, err := b.D.Next(t.Context(), cat, 0)
	if err != nil || c.Task.ID != plain {
		t.Fatalf("next of cat: %v, %v; want task %d", c, err, plain)
	}
	if _, err := b.D.Submit(t.Context(), cat, dispatcher.ClaimRef{TaskID: plain, Fence: c.Fence}, json.RawMessage(`{"ok":1}`)); err != nil {
		t.Fatal(err)
	}

	b.deliverer(t, delivery.Webhook{Name: "sink", URL: rc.srv.URL, Events: []tasks.WebhookEvent{tasks.WebhookSubmitted}}, 2*time.Second)
	testenv.Eventually(t, 20*time.Second, "every event delivered", func() bool {
		_, evs, _ := rc.got()
		return len(evs) == len(steps)+1 && backlog(t, b).PendingTotal() == 0
	})
	_, evs, bad := rc.got()
	if len(bad) > 0 {
		t.Errorf("bad requests: %v", bad)
	}
	var ids []int64
	for id := range evs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for i, s := range steps {
		ev := evs[ids[i]]
		d := ev.Data
		if d.TaskID != story || d.Fence != fences[i] || d.EditorID != s.ed.EditorID || d.Stage != s.stage || d.Decision != s.decision ||
			d.Notes != s.notes || d.TaskStatus != s.status || d.NextStage != s.next || d.GroupID != 0 || d.Overlap != 0 ||
			string(d.Result) != `{"step": `+strconv.Itoa(i)+`}` && string(d.Result) != `{"step":`+strconv.Itoa(i)+`}` {
			t.Errorf("step %d: data %+v, want stage %q decision %q notes %q, then %s at %q", i, d, s.stage, s.decision, s.notes, s.status, s.next)
		}
	}
	rc.mu.Lock()
	body := rc.bodies[ids[len(steps)]]
	rc.mu.Unlock()
	keys := dataKeys(t, body)
	if want := []string{"category", "cause", "editor_id", "fence", "holder", "result", "task_id"}; !slices.Equal(keys, want) {
		t.Errorf("plain task's event %s: keys %v, want %v", body, keys, want)
	}
	for _, k := range workflowKeys {
		if slices.Contains(keys, k) {
			t.Errorf("plain task's event %s has %q", body, k)
		}
	}
	// The staged task's bodies name the stage and the status.
	rc.mu.Lock()
	body = rc.bodies[ids[0]]
	rc.mu.Unlock()
	if keys := dataKeys(t, body); !slices.Contains(keys, "stage") || !slices.Contains(keys, "task_status") || !slices.Contains(keys, "next_stage") {
		t.Errorf("edit's event %s: keys %v, want stage, task_status and next_stage", body, keys)
	}
}
