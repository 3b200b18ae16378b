package apiclient_test

import (
	"net/http"
	"testing"

	"github.com/taskd/taskd/internal/apiclient"
)

// TestAgreement reads the agreement of two editors through the generated
// client: three groups of two, each editor deciding on one task of each; they
// agree on two groups of three.
func TestAgreement(t *testing.T) {
	t.Parallel()
	base := startTaskd(t)
	ctx := t.Context()
	admin := bearer(t, base, adminToken)

	var editors []*apiclient.ClientWithResponses
	var ids []int64
	for _, name := range []string{"ann", "bob"} {
		ed, err := admin.CreateEditorWithResponse(ctx, apiclient.CreateEditorJSONRequestBody{Name: name, Categories: []string{"labels"}})
		want(t, "create editor "+name, err, ed, ed.Body, http.StatusCreated)
		editors = append(editors, bearer(t, base, ed.JSON201.Token))
		ids = append(ids, ed.JSON201.Id)
	}
	add, err := admin.AddTasksWithResponse(ctx, apiclient.AddTasksJSONRequestBody{
		{Category: "labels", Title: "one", Overlap: ptr(2)},
		{Category: "labels", Title: "two", Overlap: ptr(2)},
		{Category: "labels", Title: "three", Overlap: ptr(2)},
	})
	want(t, "add tasks", err, add, add.Body, http.StatusCreated)

	decisions := [][]string{{"cat", "dog", "cat"}, {"cat", "dog", "dog"}}
	for i, ed := range editors {
		for j := range 3 {
			next, err := ed.NextWithResponse(ctx, apiclient.NextJSONRequestBody{})
			want(t, "next", err, next, next.Body, http.StatusOK)
			a := next.JSON200
			sub, err := ed.SubmitWithResponse(ctx, a.Task.Id, apiclient.SubmitJSONRequestBody{Fence: a.Fence, Result: map[string]any{}, Decision: ptr(decisions[i][j])})
			want(t, "submit", err, sub, sub.Body, http.StatusOK)
		}
	}

	ag, err := admin.AgreementWithResponse(ctx, &apiclient.AgreementParams{Category: "labels"})
	want(t, "agreement", err, ag, ag.Body, http.StatusOK)
	got := ag.JSON200
	if got.Units != 3 || got.PairableValues != 6 || got.Values != 6 || got.Truncated || got.Field != nil {
		t.Errorf("agreement: %s, want 3 units of 6 values", ag.Body)
	}
	// n = 6, o(cat,cat) = o(dog,dog) = 2, o(cat,dog) = o(dog,cat) = 1:
	// Do = 2/6, De = 2·3·3/(6·5) = 0.6, alpha = 1 - (1/3)/0.6 = 0.4444.
	if got.Alpha.Nominal == nil || *got.Alpha.Nominal != 0.4444 || got.Alpha.Interval != nil {
		t.Errorf("alpha: %s, want nominal 0.4444 only", ag.Body)
	}
	if len(got.Editors) != 2 || got.Editors[0].Name != "ann" || got.Editors[1].Id != ids[1] {
		t.Errorf("editors: %s, want ann and bob", ag.Body)
	}
	if len(got.Pairs) != 1 {
		t.Fatalf("pairs: %s, want one", ag.Body)
	}
	p := got.Pairs[0]
	if p.EditorA != ids[0] || p.NameB != "bob" || p.Units != 3 || p.Agreed != 2 || p.Percent != 0.6667 {
		t.Errorf("pair: %+v, want ann and bob agreeing on 2 of 3", p)
	}

	bad, err := admin.AgreementWithResponse(ctx, &apiclient.AgreementParams{Category: "labels", Limit: ptr(0)})
	want(t, "agreement with limit 0", err, bad, bad.Body, http.StatusUnprocessableEntity)
}
