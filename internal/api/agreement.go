package api

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/taskd/taskd/internal/agreement"
	"github.com/taskd/taskd/tasks"
)

// AgreementWindowDefault is the window of GET /v1/admin/agreement when since is
// not given: the 30 days before until.
const AgreementWindowDefault = 30 * 24 * time.Hour

// agreementParams are the query parameters of GET /v1/admin/agreement.
var agreementParams = map[string]bool{"category": true, "since": true, "until": true, "limit": true}

// agreementJSON is the answer of GET /v1/admin/agreement.
type agreementJSON struct {
	Category string `json:"category"`
	Since    string `json:"since"`
	Until    string `json:"until"`
	// Field is the result field compared, null for the decision.
	Field *string `json:"field"`
	// Values is how many values were read; Truncated, whether the read
	// stopped at its limit.
	Values    int  `json:"values"`
	Truncated bool `json:"truncated"`
	// Units are the groups with two values or more, PairableValues the
	// values they hold.
	Units          int                `json:"units"`
	PairableValues int                `json:"pairable_values"`
	Alpha          agreementAlphaJSON `json:"alpha"`
	Editors        []agreementEditor  `json:"editors"`
	Pairs          []agreementPair    `json:"pairs"`
}

// agreementAlphaJSON is Krippendorff's alpha by metric; null where undefined,
// interval absent unless the category's values are numbers.
type agreementAlphaJSON struct {
	Nominal  *float64  `json:"nominal"`
	Interval **float64 `json:"interval,omitempty"`
}

type agreementEditor struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Values int    `json:"values"`
}

type agreementPair struct {
	EditorA int64    `json:"editor_a"`
	NameA   string   `json:"name_a"`
	EditorB int64    `json:"editor_b"`
	NameB   string   `json:"name_b"`
	Units   int      `json:"units"`
	Agreed  int      `json:"agreed"`
	Percent float64  `json:"percent"`
	Kappa   *float64 `json:"kappa"`
}

// definedOr is a coefficient for JSON: nil (null) when undefined, else rounded
// to 4 decimals.
func definedOr(v float64, defined bool) *float64 {
	if !defined || math.IsNaN(v) {
		return nil
	}
	r := math.Round(v*1e4) / 1e4
	return &r
}

// agreement answers with the agreement of the editors of a category's overlap
// groups over a window: Krippendorff's alpha (nominal, and interval when the
// category's values are numbers) and each pair of editors' percent agreement
// and Cohen's kappa. See package agreement for what is undefined.
func (a *api) agreement(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	for name, vals := range q {
		if !agreementParams[name] {
			return errorf(http.StatusBadRequest, codeBadRequest, "unknown query parameter %q", name)
		}
		if len(vals) > 1 {
			return errorf(http.StatusBadRequest, codeBadRequest, "query parameter %q is given %d times", name, len(vals))
		}
	}
	p := tasks.AgreementParams{Category: q.Get("category"), Until: time.Now()}
	if p.Category == "" {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "category is required")
	}
	for name, dst := range map[string]*time.Time{"since": &p.Since, "until": &p.Until} {
		if s := q.Get(name); s != "" {
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return errorf(http.StatusUnprocessableEntity, codeInvalid,
					"%s must be an RFC 3339 time such as 2026-01-02T15:04:05Z, not %q", name, s)
			}
			*dst = t
		}
	}
	if p.Since.IsZero() {
		p.Since = p.Until.Add(-AgreementWindowDefault)
	}
	limit, err := positiveParam(q.Get("limit"), "limit", tasks.AgreementLimitMax)
	if err != nil {
		return err
	}
	p.Limit = int(limit)
	vs, err := a.store.Agreement(r.Context(), p)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, agreementOf(p, vs))
	return nil
}

// agreementOf measures vs and shapes the answer.
func agreementOf(p tasks.AgreementParams, vs *tasks.AgreementValues) agreementJSON {
	rs := make([]agreement.Rating, len(vs.Values))
	names := map[int64]string{}
	counts := map[int64]int{}
	var ids []int64
	for i, v := range vs.Values {
		rs[i] = agreement.Rating{Unit: v.GroupID, Coder: v.EditorID, Value: v.Value}
		if _, ok := names[v.EditorID]; !ok {
			ids = append(ids, v.EditorID)
		}
		names[v.EditorID] = v.EditorName
		counts[v.EditorID]++
	}
	s := agreement.Summarize(agreement.Units(rs), vs.Interval)
	out := agreementJSON{
		Category: p.Category, Since: formatTime(p.Since), Until: formatTime(p.Until), Field: orNull(vs.Field),
		Values: len(vs.Values), Truncated: vs.Truncated,
		Units: s.Nominal.Units, PairableValues: s.Nominal.Pairable,
		Alpha:   agreementAlphaJSON{Nominal: definedOr(s.Nominal.Value, s.Nominal.Defined)},
		Editors: make([]agreementEditor, 0, len(ids)), Pairs: make([]agreementPair, len(s.Pairs)),
	}
	if vs.Interval {
		var iv *float64
		if s.Interval != nil {
			iv = definedOr(s.Interval.Value, s.Interval.Defined)
		}
		out.Alpha.Interval = &iv
	}
	slices.Sort(ids)
	for _, id := range ids {
		out.Editors = append(out.Editors, agreementEditor{ID: id, Name: nameOr(names[id], id), Values: counts[id]})
	}
	for i, pr := range s.Pairs {
		out.Pairs[i] = agreementPair{
			EditorA: pr.A, NameA: nameOr(names[pr.A], pr.A), EditorB: pr.B, NameB: nameOr(names[pr.B], pr.B),
			Units: pr.Units, Agreed: pr.Agreed, Percent: *definedOr(pr.Percent, true),
			Kappa: definedOr(pr.Kappa.Value, pr.Kappa.Defined),
		}
	}
	return out
}

// nameOr is name, or "editor <id>" for an editor gone since.
func nameOr(name string, id int64) string {
	if name != "" {
		return name
	}
	return "editor " + strconv.FormatInt(id, 10)
}
