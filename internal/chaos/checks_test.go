package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd/internal/config"
)

// t0 is the start of the constructed histories.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// history builds an audit trail: each call adds one event, a millisecond
// after the one before.
type history struct{ events []event }

func (h *history) add(kind string, task, fence, editor int64) *history {
	n := int64(len(h.events))
	h.events = append(h.events, event{ID: n + 1, TaskID: task, Kind: kind, Fence: fence, EditorID: editor,
		At: t0.Add(time.Duration(n) * time.Millisecond)})
	return h
}

// wantFindings fails unless fs has exactly n findings, each of check and
// each containing every part of want.
func wantFindings(t *testing.T, what string, fs []finding, n int, check string, want ...string) {
	t.Helper()
	if len(fs) != n {
		t.Errorf("%s: %d findings %v, want %d", what, len(fs), fs, n)
		return
	}
	for _, f := range fs {
		if f.check != check {
			t.Errorf("%s: finding of check %q, want %q: %s", what, f.check, check, f.what)
		}
		for _, w := range want {
			if !strings.Contains(f.what, w) {
				t.Errorf("%s: finding %q does not say %q", what, f.what, w)
			}
		}
	}
}

func TestAuditTrailKeepsEachEditorWithinItsCapacity(t *testing.T) {
	t.Parallel()
	tasks := map[int64]taskRow{1: {}, 2: {}, 3: {}, 4: {}}
	capacity := map[int64]int{7: 2}

	// Editor 7 (capacity 2) holds two, ends one, takes a third: fine.
	ok := (&history{}).add("claimed", 1, 1, 7).add("claimed", 2, 1, 7).add("submitted", 1, 1, 7).add("claimed", 3, 1, 7)
	tr := auditTrail(ok.events, tasks, capacity, false, time.Second)
	wantFindings(t, "within capacity", tr.findings, 0, "")
	if tr.beside != 2 {
		t.Errorf("%d claims beside another, want 2", tr.beside)
	}
	if tr.claimed != 3 || len(tr.claims) != 3 || tr.claims[claimRef{1, 1}].end == nil || tr.claims[claimRef{2, 1}].end != nil {
		t.Errorf("claims %+v (%d claimed), want 3, task 1's ended and task 2's open", tr.claims, tr.claimed)
	}

	// A third while it holds two.
	over := (&history{}).add("claimed", 1, 1, 7).add("claimed", 2, 1, 7).add("claimed", 3, 1, 7)
	tr = auditTrail(over.events, tasks, capacity, false, time.Second)
	wantFindings(t, "above capacity 2", tr.findings, 1, "editor within its capacity", "editor 7 (capacity 2)", "task 3")

	// An editor of no capacity row has the article's one.
	two := (&history{}).add("claimed", 1, 1, 8).add("expired", 1, 1, 8).add("claimed", 2, 1, 8).add("claimed", 3, 1, 8)
	tr = auditTrail(two.events, tasks, capacity, false, time.Second)
	wantFindings(t, "above capacity 1", tr.findings, 1, "editor within its capacity", "editor 8 (capacity 1)", "task 3", "{2 1}")

	// A fence claimed twice.
	dup := (&history{}).add("claimed", 4, 2, 7).add("released", 4, 2, 7).add("claimed", 4, 2, 8)
	tr = auditTrail(dup.events, tasks, capacity, false, time.Second)
	wantFindings(t, "fence claimed twice", tr.findings, 1, "one claim per fence", "task 4 fence 2")
}

func TestAuditTrailInTimeOrderCountsSameMillisecondEnds(t *testing.T) {
	t.Parallel()
	tasks := map[int64]taskRow{1: {}, 2: {}}
	// Galera's order: the end of task 1's claim has the time of the claim
	// of task 2 but comes after it.
	h := &history{}
	h.add("claimed", 1, 1, 7)
	h.events = append(h.events,
		event{ID: 10, TaskID: 2, Kind: "claimed", Fence: 1, EditorID: 7, At: t0.Add(time.Second)},
		event{ID: 9, TaskID: 1, Kind: "submitted", Fence: 1, EditorID: 7, At: t0.Add(time.Second)})
	if tr := auditTrail(h.events, tasks, nil, true, time.Minute); len(tr.findings) != 0 {
		t.Errorf("time order: %v, want none", tr.findings)
	}
	if tr := auditTrail(h.events, tasks, nil, false, time.Minute); len(tr.findings) != 1 {
		t.Errorf("id order: %v, want the second claim found above capacity", tr.findings)
	}
}

func TestAuditTrailFindsTwoSlotsOfAGroupHeldAtOnce(t *testing.T) {
	t.Parallel()
	// Tasks 10, 11, 12 are one group of three; 20 is alone.
	tasks := map[int64]taskRow{10: {group: 10}, 11: {group: 10}, 12: {group: 10}, 20: {}}
	capacity := map[int64]int{7: 3}
	ok := (&history{}).add("claimed", 10, 1, 7).add("claimed", 20, 1, 7).add("released", 10, 1, 7).add("claimed", 11, 1, 7)
	wantFindings(t, "one slot at a time", auditTrail(ok.events, tasks, capacity, false, time.Second).findings, 0, "")

	bad := (&history{}).add("claimed", 10, 1, 7).add("claimed", 20, 1, 7).add("claimed", 12, 1, 7)
	wantFindings(t, "two slots held", auditTrail(bad.events, tasks, capacity, false, time.Second).findings, 1,
		"one slot of a group per editor", "task 12", "task 10", "group 10")

	after := (&history{}).add("claimed", 10, 1, 7).add("submitted", 10, 1, 7).add("claimed", 11, 1, 7)
	wantFindings(t, "a slot after submitting another", auditTrail(after.events, tasks, capacity, false, time.Second).findings, 1,
		"one slot of a group per editor", "task 11", "submitted task 10", "group 10")
}

func TestCheckResultHolders(t *testing.T) {
	t.Parallel()
	h := (&history{}).add("claimed", 1, 1, 7).add("submitted", 1, 1, 7).add("claimed", 1, 2, 8).add("submitted", 1, 2, 8)
	claims := auditTrail(h.events, map[int64]taskRow{1: {}}, nil, false, time.Second).claims
	good := []resultRow{{claimRef: claimRef{1, 1}, editor: 7}, {claimRef: claimRef{1, 2}, editor: 8}}
	n, fs := checkResultHolders(good, claims)
	if n != 2 {
		t.Errorf("checked %d, want 2", n)
	}
	wantFindings(t, "holders' results", fs, 0, "")

	bad := []resultRow{{claimRef: claimRef{1, 1}, editor: 8}, {claimRef: claimRef{1, 3}, editor: 7}}
	_, fs = checkResultHolders(bad, claims)
	wantFindings(t, "another's and an unclaimed fence", fs, 2, "each result by the holder of its claim", "task 1 fence")
}

func TestCheckStageOrder(t *testing.T) {
	t.Parallel()
	r := func(fence int64, editor int64, stage int, decision string) resultRow {
		return resultRow{claimRef: claimRef{1, fence}, editor: editor, stage: stage, decision: decision}
	}
	staged := func(status string, fence int64, stage int) map[int64]taskRow {
		return map[int64]taskRow{1: {fence: fence, status: status, stage: stage, stageCount: 2}}
	}
	for _, c := range []struct {
		name    string
		tasks   map[int64]taskRow
		results []resultRow
		want    string // "" for no finding
	}{
		{"edit, send back, edit, approve", staged("done", 4, 1),
			[]resultRow{r(1, 7, 0, ""), r(2, 8, 1, "send_back"), r(3, 7, 0, ""), r(4, 8, 1, "approve")}, ""},
		{"one stage, one result", map[int64]taskRow{1: {fence: 3, status: "done", stageCount: 1}}, []resultRow{r(3, 7, 0, "")}, ""},
		{"pending at review after the edit", staged("pending", 1, 1), []resultRow{r(1, 7, 0, "")}, ""},
		{"assigned at edit after a send back", staged("assigned", 3, 0), []resultRow{r(1, 7, 0, ""), r(2, 8, 1, "send_back")}, ""},
		{"pending with none", staged("pending", 0, 0), nil, ""},

		{"a stage result twice", staged("done", 3, 1), []resultRow{r(1, 7, 0, ""), r(2, 9, 0, ""), r(3, 8, 1, "")},
			"at stage 0, want stage 1"},
		{"review first", staged("done", 1, 1), []resultRow{r(1, 8, 1, "")}, "at stage 1, want stage 0"},
		{"two results of one stage", map[int64]taskRow{1: {fence: 2, status: "done", stageCount: 1}},
			[]resultRow{r(1, 7, 0, ""), r(2, 8, 0, "")}, "results after its last stage"},
		{"sent back from the first stage", staged("pending", 1, 0), []resultRow{r(1, 7, 0, "send_back")}, "sent back from its first stage"},
		{"done after the edit", staged("done", 1, 0), []resultRow{r(1, 7, 0, "")}, "end before its last stage"},
		{"done after a send back", staged("done", 2, 0), []resultRow{r(1, 7, 0, ""), r(2, 8, 1, "send_back")}, "end before its last stage"},
		{"done without a result", map[int64]taskRow{1: {fence: 1, status: "done", stageCount: 1}}, nil, "end before its last stage"},
		{"done at a later fence", staged("done", 5, 1), []resultRow{r(1, 7, 0, ""), r(2, 8, 1, "")}, "last result is at fence 2"},
		{"result above the fence", staged("done", 1, 1), []resultRow{r(1, 7, 0, ""), r(2, 8, 1, "")}, "above the task's fence"},
		{"pending after the last stage", staged("pending", 2, 1), []resultRow{r(1, 7, 0, ""), r(2, 8, 1, "")}, "has a result at its last stage"},
		{"pending at the wrong stage", staged("pending", 1, 0), []resultRow{r(1, 7, 0, "")}, "results lead to stage 1"},
	} {
		n, fs := checkStageOrder(c.tasks, resultsByTask(c.results))
		if n != 1 {
			t.Errorf("%s: checked %d, want 1", c.name, n)
		}
		if c.want == "" {
			wantFindings(t, c.name, fs, 0, "")
		} else {
			wantFindings(t, c.name, fs, 1, "one result per stage visit, in workflow order", "task 1", c.want)
		}
	}
}

func TestCheckFourEyes(t *testing.T) {
	t.Parallel()
	ok := []resultRow{
		{claimRef: claimRef{1, 1}, editor: 7, stage: 0}, {claimRef: claimRef{1, 2}, editor: 8, stage: 1, decision: "send_back"},
		{claimRef: claimRef{1, 3}, editor: 7, stage: 0}, {claimRef: claimRef{1, 4}, editor: 8, stage: 1},
		{claimRef: claimRef{2, 1}, editor: 8, stage: 0}, {claimRef: claimRef{2, 2}, editor: 7, stage: 1},
	}
	n, fs := checkFourEyes(resultsByTask(ok))
	if n != 6 {
		t.Errorf("checked %d, want 6", n)
	}
	wantFindings(t, "each at its own stage", fs, 0, "")

	bad := []resultRow{
		{claimRef: claimRef{1, 1}, editor: 7, stage: 0}, {claimRef: claimRef{1, 2}, editor: 8, stage: 1, decision: "send_back"},
		{claimRef: claimRef{1, 3}, editor: 8, stage: 0},
	}
	_, fs = checkFourEyes(resultsByTask(bad))
	wantFindings(t, "reviewer edits", fs, 1, "four eyes: no editor at two stages of a task", "task 1: editor 8", "stages 1 and 0")
}

func TestCheckGroupResults(t *testing.T) {
	t.Parallel()
	tasks := map[int64]taskRow{10: {group: 10}, 11: {group: 10}, 12: {group: 10}, 20: {}, 21: {}}
	ok := []resultRow{
		{claimRef: claimRef{10, 1}, editor: 7}, {claimRef: claimRef{11, 1}, editor: 8}, {claimRef: claimRef{12, 2}, editor: 9},
		{claimRef: claimRef{20, 1}, editor: 7}, {claimRef: claimRef{21, 1}, editor: 7},
	}
	n, fs := checkGroupResults(tasks, ok)
	if n != 3 {
		t.Errorf("checked %d, want the 3 results of the group", n)
	}
	wantFindings(t, "three editors", fs, 0, "")

	bad := []resultRow{{claimRef: claimRef{10, 1}, editor: 7}, {claimRef: claimRef{11, 1}, editor: 8}, {claimRef: claimRef{12, 2}, editor: 7}}
	_, fs = checkGroupResults(tasks, bad)
	wantFindings(t, "one editor twice", fs, 1, "one slot of a group per editor", "editor 7", "tasks 10 and 12", "group 10")
}

func TestCheckSentBack(t *testing.T) {
	t.Parallel()
	tasks := map[int64]taskRow{1: {category: "desk", stageCount: 2}}
	hold := map[string]time.Duration{"desk": 3 * time.Second}
	results := []resultRow{
		{claimRef: claimRef{1, 1}, editor: 7, stage: 0, at: t0},
		{claimRef: claimRef{1, 2}, editor: 8, stage: 1, decision: "send_back", at: t0.Add(time.Second)},
	}
	claimedBy := func(editor int64, after time.Duration) map[claimRef]*claimHistory {
		return map[claimRef]*claimHistory{
			{1, 1}: {editor: 7, claimedAt: t0.Add(-time.Second)},
			{1, 2}: {editor: 8, claimedAt: t0.Add(500 * time.Millisecond)},
			{1, 3}: {editor: editor, claimedAt: t0.Add(time.Second + after)},
		}
	}
	for _, c := range []struct {
		name   string
		editor int64
		after  time.Duration
		bad    bool
	}{
		{"its editor at once", 7, 10 * time.Millisecond, false},
		{"another after the hold", 9, 3 * time.Second, false},
		{"another within the hold", 9, time.Second, true},
	} {
		n, fs := checkSentBack(tasks, resultsByTask(results), claimedBy(c.editor, c.after), hold)
		if n != 1 {
			t.Errorf("%s: checked %d, want 1", c.name, n)
		}
		if c.bad {
			wantFindings(t, c.name, fs, 1, "sent back: the editor of the stage first, or anyone after the hold",
				"task 1 sent back at fence 2 (reserved for editor 7", "claimed by editor 9")
		} else {
			wantFindings(t, c.name, fs, 0, "")
		}
	}
}

func TestAgreement(t *testing.T) {
	t.Parallel()
	tasks := map[int64]taskRow{10: {group: 10}, 11: {group: 10}, 12: {group: 12}, 13: {group: 12}, 14: {group: 14}, 15: {group: 14}, 20: {}}
	results := []resultRow{
		{claimRef: claimRef{10, 1}, decision: "news"}, {claimRef: claimRef{11, 1}, decision: "news"},
		{claimRef: claimRef{12, 1}, decision: "news"}, {claimRef: claimRef{13, 1}, decision: "sport"},
		{claimRef: claimRef{14, 1}, decision: "news"}, {claimRef: claimRef{20, 1}, decision: "news"},
	}
	if groups, agreeing := agreement(tasks, results); groups != 2 || agreeing != 1 {
		t.Errorf("agreement = %d groups, %d agreeing; want 2 complete groups, 1 agreeing", groups, agreeing)
	}
}

func TestCheckClaimStages(t *testing.T) {
	t.Parallel()
	tasks := map[int64]taskRow{
		1: {category: "desk", stageCount: 2, stages: []string{"edit", "review"}},
		2: {category: "plain", stageCount: 1},
	}
	limits := map[editorCategory][]string{{8, "desk"}: {"review"}}
	results := resultsByTask([]resultRow{
		{claimRef: claimRef{1, 1}, editor: 7, stage: 0},
		{claimRef: claimRef{1, 2}, editor: 9, stage: 1, decision: "send_back"},
	})
	claimOf := func(editor int64) *claimHistory { return &claimHistory{editor: editor} }
	for _, c := range []struct {
		name   string
		claims map[claimRef]*claimHistory
		want   []string // parts of the one finding, none for none
		check  string
	}{
		{"edit, review, edit again by its editor", map[claimRef]*claimHistory{
			{1, 1}: claimOf(7), {1, 2}: claimOf(9), {1, 3}: claimOf(7), {2, 1}: claimOf(8)}, nil, ""},
		{"a review-only editor reviews", map[claimRef]*claimHistory{{1, 2}: claimOf(8)}, nil, ""},
		{"the editor reviews its own edit", map[claimRef]*claimHistory{{1, 2}: claimOf(7)},
			[]string{"editor 7 claimed task 1 fence 2 at stage 1 after its result at stage 0"}, "four eyes: no editor at two stages of a task"},
		{"the reviewer edits after sending back", map[claimRef]*claimHistory{{1, 3}: claimOf(9)},
			[]string{"editor 9 claimed task 1 fence 3 at stage 0 after its result at stage 1"}, "four eyes: no editor at two stages of a task"},
		{"a review-only editor edits", map[claimRef]*claimHistory{{1, 1}: claimOf(8)},
			[]string{"editor 8 claimed task 1 fence 1 at stage edit", "[review]"}, "claims at a stage the editor may take"},
	} {
		n, fs := checkClaimStages(tasks, results, c.claims, limits)
		staged := int64(0)
		for k := range c.claims {
			if k.Task == 1 {
				staged++
			}
		}
		if n != staged {
			t.Errorf("%s: checked %d, want the %d claims of the staged task", c.name, n, staged)
		}
		if c.want == nil {
			wantFindings(t, c.name, fs, 0, "")
		} else {
			wantFindings(t, c.name, fs, 1, c.check, c.want...)
		}
	}
}

// TestApplyBeats: heartbeats write no event, so a claim's lease times come
// from its editor's answers: a 200's lease moves lastLease (never back), an
// unanswered attempt lastTry, on the database clock; another claim's beats
// and beats of claims the trail has not are left alone.
func TestApplyBeats(t *testing.T) {
	t.Parallel()
	h := (&history{}).add("claimed", 1, 1, 7).add("claimed", 2, 1, 8)
	claims := auditTrail(h.events, map[int64]taskRow{1: {}, 2: {}}, nil, false, time.Second).claims
	const lease, offset = 2 * time.Second, 300 * time.Millisecond
	applyBeats(claims, []beat{
		{ref: claimRef{1, 1}, leaseEnd: t0.Add(10 * time.Second)},
		{ref: claimRef{1, 1}, leaseEnd: t0.Add(5 * time.Second)}, // an answer that came late
		{ref: claimRef{1, 1}, unsure: t0.Add(20 * time.Second)},
		{ref: claimRef{3, 1}, leaseEnd: t0.Add(time.Minute)},
	}, lease, offset)
	c := claims[claimRef{1, 1}]
	if want := t0.Add(10*time.Second - lease); !c.lastLease.Equal(want) {
		t.Errorf("lastLease %v, want the latest answered lease - the lease, %v", c.lastLease, want)
	}
	if want := t0.Add(20*time.Second + offset); !c.lastTry.Equal(want) {
		t.Errorf("lastTry %v, want the unanswered attempt's end on the database clock, %v", c.lastTry, want)
	}
	if o := claims[claimRef{2, 1}]; !o.lastLease.Equal(t0.Add(time.Millisecond)) || !o.lastTry.IsZero() {
		t.Errorf("the other claim moved: %+v", o)
	}
}

func TestCheckFeed(t *testing.T) {
	t.Parallel()
	seqs := []int64{1, 2, 3, 4, 5, 6, 7}
	purged := map[int64]bool{1: true, 2: true, 3: true, 4: true}
	// Read 1, 2; fell behind; 410 naming 4; read on from 4.
	good := []feedStep{{after: 0, cursors: []int64{1, 2}}, {after: 2, expired: 4}, {after: 4, cursors: []int64{5, 6, 7}}}
	var c PurgeCounts
	n, fs := checkFeed(good, seqs, purged, &c)
	if n != 5 || c.FeedExpired != 1 || c.FeedSkipped != 2 {
		t.Errorf("read %d, 410s %d, skipped %d; want 5, 1, 2", n, c.FeedExpired, c.FeedSkipped)
	}
	wantFindings(t, "a 410 past a purged cursor", fs, 0, "")

	// From 2 to 5 without a 410: 3 and 4 were there.
	gap := []feedStep{{after: 0, cursors: []int64{1, 2}}, {after: 2, cursors: []int64{5, 6, 7}}}
	_, fs = checkFeed(gap, seqs, purged, &PurgeCounts{})
	wantFindings(t, "a silent gap", fs, 1, "results feed", "silent gap: cursor 5 followed 2")

	// A cursor going back, and a 410 naming a result not purged.
	back := []feedStep{{after: 0, cursors: []int64{1, 2, 2}}, {after: 2, expired: 6}}
	_, fs = checkFeed(back, seqs, purged, &PurgeCounts{})
	wantFindings(t, "a cursor back, a 410 past a live result", fs, 2, "results feed", "")
}

// checkDoneByOther passes a loser whose winner is beside it (the holder's
// result below a refused hedge, a takeover that ended a refused claim), and
// finds a refusal with no winner, and one whose own result was kept.
func TestCheckDoneByOther(t *testing.T) {
	results := map[claimRef]resultRow{
		{Task: 1, Fence: 2}: {claimRef: claimRef{Task: 1, Fence: 2}, editor: 8}, // the hedger won
		{Task: 2, Fence: 4}: {claimRef: claimRef{Task: 2, Fence: 4}, editor: 7}, // the holder won
		{Task: 3, Fence: 1}: {claimRef: claimRef{Task: 3, Fence: 1}, editor: 7}, // kept, yet refused
	}
	takeover := &event{Kind: "released", Detail: hedgeDetail}
	claims := map[claimRef]*claimHistory{
		{Task: 1, Fence: 1}: {editor: 7, end: takeover},
		{Task: 1, Fence: 2}: {editor: 8, takeover: true},
		{Task: 2, Fence: 4}: {editor: 7, end: &event{Kind: "submitted"}},
		{Task: 4, Fence: 1}: {editor: 7, end: &event{Kind: "released"}},
	}
	refusals := []editorRef{
		{claimRef{Task: 1, Fence: 1}, 7, false}, // holder refused: a takeover ended its claim
		{claimRef{Task: 2, Fence: 5}, 8, true},  // hedger refused: the holder's result is at fence 4
		{claimRef{Task: 3, Fence: 1}, 7, false},
		{claimRef{Task: 4, Fence: 1}, 7, false}, // released by itself: no winner
		{claimRef{Task: 5, Fence: 2}, 8, true},  // a hedge whose holder has no result
	}
	n, fs := checkDoneByOther(refusals, results, claims)
	if n != 5 || len(fs) != 3 {
		t.Fatalf("checked %d, found %v; want 5 checked and the refusals of tasks 3, 4 and 5", n, fs)
	}
	for i, task := range []string{"task 3", "task 4", "task 5"} {
		if !strings.Contains(fs[i].what, task) {
			t.Errorf("finding %d = %q, want one about %s", i, fs[i].what, task)
		}
	}
}

// hedgeFacts counts the hedges that took their task over, and finds a
// takeover by an editor the hedge was not offered to, and a hedged slot
// with the holder's result beside the takeover's.
func TestHedgeFacts(t *testing.T) {
	ann := &editor{id: 7, log: editorLog{hedges: []claimRef{{Task: 1, Fence: 2}, {Task: 2, Fence: 3}, {Task: 3, Fence: 5}}}}
	bob := &editor{id: 8, log: editorLog{hedges: []claimRef{{Task: 4, Fence: 2}}, doneByOther: []claimRef{{Task: 4, Fence: 2}, {Task: 6, Fence: 1}}}}
	claims := map[claimRef]*claimHistory{
		{Task: 1, Fence: 2}: {editor: 7, takeover: true}, // ann's won
		{Task: 2, Fence: 3}: {editor: 9},                 // the next claim, not a takeover
		{Task: 3, Fence: 5}: {editor: 9, takeover: true}, // taken over by another
		{Task: 5, Fence: 2}: {editor: 9, takeover: true}, // beside the holder's result
	}
	results := map[claimRef]resultRow{
		{Task: 1, Fence: 2}: {claimRef: claimRef{Task: 1, Fence: 2}, editor: 7},
		{Task: 5, Fence: 1}: {claimRef: claimRef{Task: 5, Fence: 1}, editor: 8},
	}
	got := hedgeFacts([]*editor{ann, bob}, claims, results)
	want := HedgeCounts{Taken: 4, Won: 1, Submitted: 1, HolderRefused: 1, HedgerRefused: 1}
	if got.counts != want || got.checked != 4 {
		t.Errorf("counts %+v, checked %d; want %+v, 4", got.counts, got.checked, want)
	}
	if len(got.findings) != 2 || !strings.Contains(got.findings[0].what, "task 3") || !strings.Contains(got.findings[1].what, "task 5") {
		t.Errorf("findings %v, want the takeover of task 3 by another editor and the two results of task 5", got.findings)
	}
	if len(got.refusals) != 2 || !got.refusals[0].hedge || got.refusals[1].hedge {
		t.Errorf("refusals %v, want bob's hedge of task 4 and his claim of task 6", got.refusals)
	}
}

// The workflow pass's config.yaml is one taskd loads, with the hedges of
// desk and rush on.
func TestWorkflowConfigHedges(t *testing.T) {
	path, err := writeWorkflowConfig(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	env := func(k string) (string, bool) {
		if k == "TASKD_MYSQL_DSN" {
			return "chaos:chaos@tcp(127.0.0.1:3306)/taskd", true
		}
		return "", false
	}
	cfg, err := config.Load(path, env)
	if err != nil {
		t.Fatalf("load %s: %v", path, err)
	}
	hedged := map[string]bool{}
	for _, c := range cfg.Categories {
		if c.Hedge.BeforeDue == hedgeBeforeDue && c.Hedge.InactiveFor == hedgeInactiveFor {
			hedged[c.Name] = true
		}
	}
	if len(hedged) != 2 || !hedged["desk"] || !hedged[rushCategory] {
		t.Errorf("hedged categories %v, want desk and %s", hedged, rushCategory)
	}
}
