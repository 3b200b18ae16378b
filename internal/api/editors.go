package api

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/taskd/taskd/tasks"
)

// Editor management: the admin's view of editors and its changes to them, and an
// editor's view of itself (GET /v1/me).

// countsJSON counts an editor's events (see tasks.EventCounts).
type countsJSON struct {
	Claimed   int64 `json:"claimed"`
	Submitted int64 `json:"submitted"`
	Released  int64 `json:"released"`
	Skipped   int64 `json:"skipped"`
	Expired   int64 `json:"expired"`
}

func countsOf(c tasks.EventCounts) countsJSON {
	return countsJSON{Claimed: c.Claimed, Submitted: c.Submitted, Released: c.Released, Skipped: c.Skipped, Expired: c.Expired}
}

// editorClaimJSON is an editor's live claim as the admin sees it.
type editorClaimJSON struct {
	TaskID         int64  `json:"task_id"`
	Fence          int64  `json:"fence"`
	LeaseExpiresAt string `json:"lease_expires_at"`
	// TraceID is the claim's trace id, from its stored traceparent; omitted
	// when unknown.
	TraceID string `json:"trace_id,omitempty"`
}

// editorJSON is an editor as GET /v1/editors lists it.
type editorJSON struct {
	ID         int64            `json:"id"`
	Name       string           `json:"name"`
	Categories []string         `json:"categories"`
	Disabled   bool             `json:"disabled"`
	DisabledAt *string          `json:"disabled_at"`
	CreatedAt  string           `json:"created_at"`
	Claim      *editorClaimJSON `json:"claim"`
	Today      countsJSON       `json:"today"`
	editorWorkJSON
	// Holding counts the editor's live claims, for an editor whose capacity
	// is above 1 or that holds more than one; omitted otherwise (claim says
	// it all).
	Holding int `json:"holding,omitempty"`
}

// editorWorkJSON is what an editor may take: its capacity, always, and its
// stage limits, when it has any.
type editorWorkJSON struct {
	Capacity int                 `json:"capacity"`
	Stages   map[string][]string `json:"stages,omitempty"`
}

// stagesOrNil is nil for no stage limits.
func stagesOrNil(m map[string][]string) map[string][]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// checkCapacity refuses a capacity given out of 1..tasks.MaxCapacity.
func checkCapacity(c *int) error {
	if c != nil && (*c < 1 || *c > tasks.MaxCapacity) {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "capacity must be 1..%d, got %d", tasks.MaxCapacity, *c)
	}
	return nil
}

// withLoad adds what the editor may take and holds to e.
func (e *editorJSON) withLoad(l *tasks.EditorLoad) {
	e.Capacity = 1
	if l == nil {
		return
	}
	e.Capacity, e.Stages = max(1, l.Capacity), stagesOrNil(l.Stages)
	if e.Capacity > 1 || l.Holding > 1 {
		e.Holding = l.Holding
	}
}

func editorOf(s *tasks.EditorSummary) editorJSON {
	e := editorJSON{
		ID: s.ID, Name: s.Name, Categories: s.Categories, Disabled: s.Disabled(),
		DisabledAt: formatTimePtr(s.DisabledAt), CreatedAt: formatTime(s.CreatedAt), Today: countsOf(s.Today),
	}
	if e.Categories == nil {
		e.Categories = []string{}
	}
	if c := s.Claim; c != nil {
		e.Claim = &editorClaimJSON{
			TaskID: c.TaskID, Fence: c.Fence, LeaseExpiresAt: formatTime(c.LeaseExpiresAt),
			TraceID: traceIDOf(c.TraceContext),
		}
	}
	return e
}

type listEditorsResponse struct {
	Editors []editorJSON `json:"editors"`
	// NextCursor continues the listing; null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// listEditors answers with a page of editors in id order.
func (a *api) listEditors(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "limit", "cursor")
	if err != nil {
		return err
	}
	p := tasks.ListEditorsParams{Limit: tasks.ListEditorsLimitDefault}
	if s, ok := q["limit"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			return errorf(http.StatusBadRequest, codeBadRequest, "limit must be an integer, got %q", s)
		}
		if n < 1 || n > tasks.ListEditorsLimitMax {
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "limit must be 1..%d, got %d", tasks.ListEditorsLimitMax, n)
		}
		p.Limit = n
	}
	if s, ok := q["cursor"]; ok {
		// The cursor is the id of the last editor of the page before; clients
		// pass it back as they got it.
		id, err := strconv.ParseInt(s, 10, 64)
		if err != nil || id < 1 || s[0] == '+' {
			return errorf(http.StatusBadRequest, codeBadRequest, "cursor %q is not one this API gave", s)
		}
		p.AfterID = id
	}
	page, err := a.store.ListEditors(r.Context(), p)
	if err != nil {
		return err
	}
	eds := page.Editors
	ids := make([]int64, len(eds))
	for i := range eds {
		ids[i] = eds[i].ID
	}
	loads, err := a.store.EditorLoads(r.Context(), ids)
	if err != nil {
		return err
	}
	out := listEditorsResponse{Editors: make([]editorJSON, len(eds))}
	for i := range eds {
		out.Editors[i] = editorOf(&eds[i])
		out.Editors[i].withLoad(loads[eds[i].ID])
	}
	if page.NextAfterID != 0 {
		next := strconv.FormatInt(page.NextAfterID, 10)
		out.NextCursor = &next
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// query returns r's query parameters, each given at most once and among known:
// anything else is a 400 apiError.
func query(r *http.Request, known ...string) (map[string]string, error) {
	values, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, codeBadRequest, "malformed query string")
	}
	out := make(map[string]string, len(values))
	for name, vs := range values {
		ok := false
		for _, k := range known {
			ok = ok || k == name
		}
		switch {
		case !ok:
			return nil, errorf(http.StatusBadRequest, codeBadRequest, "unknown query parameter %q", name)
		case len(vs) != 1:
			return nil, errorf(http.StatusBadRequest, codeBadRequest, "query parameter %q is given %d times", name, len(vs))
		}
		out[name] = vs[0]
	}
	return out, nil
}

// editorStatsJSON is what the audit trail says about an editor (see tasks.EditorStats).
type editorStatsJSON struct {
	AllTime countsJSON `json:"all_time"`
	// MedianClaimToSubmitMS is null when MedianOf is 0.
	MedianClaimToSubmitMS *int64  `json:"median_claim_to_submit_ms"`
	MedianOf              int     `json:"median_of"`
	LastActiveAt          *string `json:"last_active_at"`
	// RecentClaims are the latest claims, newest first; never null.
	RecentClaims []recentClaimJSON `json:"recent_claims"`
}

// recentClaimJSON is one of an editor's latest claims (see tasks.RecentClaim).
type recentClaimJSON struct {
	TaskID    int64  `json:"task_id"`
	Fence     int64  `json:"fence"`
	ClaimedAt string `json:"claimed_at"`
	TraceID   string `json:"trace_id,omitempty"`
}

func editorStatsOf(st *tasks.EditorStats) editorStatsJSON {
	out := editorStatsJSON{AllTime: countsOf(st.AllTime), MedianOf: st.MedianOf, LastActiveAt: formatTimePtr(st.LastActiveAt),
		RecentClaims: []recentClaimJSON{}}
	for _, c := range st.RecentClaims {
		out.RecentClaims = append(out.RecentClaims, recentClaimJSON{TaskID: c.TaskID, Fence: c.Fence, ClaimedAt: formatTime(c.ClaimedAt), TraceID: c.TraceID})
	}
	if st.MedianOf > 0 {
		ms := st.MedianClaimToSubmit.Milliseconds()
		out.MedianClaimToSubmitMS = &ms
	}
	return out
}

// editorDetailJSON is an editor as GET /v1/editors/{id} shows it: as listed, with its
// stats.
type editorDetailJSON struct {
	editorJSON
	editorStatsJSON
	// Claims are the editor's live claims, oldest first, when Holding is
	// shown; omitted otherwise.
	Claims []editorClaimJSON `json:"claims,omitempty"`
}

// getEditor answers with an editor, its live claim and its stats.
func (a *api) getEditor(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if _, err := query(r); err != nil {
		return err
	}
	d, err := a.editorDetail(r, id)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, d)
	return nil
}

// editorDetail reads editor id as GET /v1/editors/{id} shows it, or a 404 apiError.
func (a *api) editorDetail(r *http.Request, id int64) (*editorDetailJSON, error) {
	s, err := a.store.GetEditorSummary(r.Context(), id)
	if err != nil {
		return nil, editorNotFound(err, id)
	}
	st, err := a.store.GetEditorStats(r.Context(), id)
	if err != nil {
		return nil, err
	}
	// Today's counts from the stats, read after the summary's: the newer.
	s.Today = st.Today
	loads, err := a.store.EditorLoads(r.Context(), []int64{id})
	if err != nil {
		return nil, err
	}
	d := &editorDetailJSON{editorJSON: editorOf(s), editorStatsJSON: editorStatsOf(st)}
	d.withLoad(loads[id])
	if d.Holding > 0 {
		held, err := a.store.EditorClaims(r.Context(), id)
		if err != nil {
			return nil, err
		}
		d.Claims = make([]editorClaimJSON, len(held.Held))
		for i, c := range held.Held {
			d.Claims[i] = editorClaimJSON{
				TaskID: c.Task.ID, Fence: c.Fence, LeaseExpiresAt: formatTime(c.LeaseExpiresAt),
				TraceID: traceIDOf(c.Task.TraceContext),
			}
		}
	}
	return d, nil
}

// editorNotFound answers tasks.ErrNotFound about editor id with a 404 apiError.
func editorNotFound(err error, id int64) error {
	if errors.Is(err, tasks.ErrNotFound) {
		return errorf(http.StatusNotFound, codeNotFound, "editor %d does not exist", id)
	}
	return err
}

type updateEditorRequest struct {
	// Name, when given, is the new name.
	Name *string `json:"name"`
	// Categories, when given (not null), replace the editor's categories.
	Categories []string `json:"categories"`
	// Capacity, when given, is the new capacity: 1..tasks.MaxCapacity.
	Capacity *int `json:"capacity"`
	// Stages, when given (not null), replace the editor's stage limits; {}
	// lifts them all. Absent: new categories keep the limits of the
	// categories that stay.
	Stages map[string][]string `json:"stages"`
}

// updateEditor changes an editor's name and/or categories, and answers with the
// editor as GET /v1/editors/{id} shows it. This process forgets the editor it
// remembered, so the editor's next request, and its next claim, see the change,
// and new categories end the long polls the editor holds here (answered 204),
// which wait for the old ones: its next poll waits for the new.
func (a *api) updateEditor(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	var req updateEditorRequest
	if err := decode(w, r, &req, false); err != nil {
		return err
	}
	if err := checkCapacity(req.Capacity); err != nil {
		return err
	}
	_, err = a.store.UpdateEditor(r.Context(), tasks.UpdateEditorParams{
		ID: id, Name: req.Name, Categories: req.Categories, Capacity: req.Capacity, Stages: req.Stages,
	})
	if err != nil {
		return editorNotFound(err, id)
	}
	change := EditorRenamed
	if req.Categories != nil || req.Stages != nil {
		// Long polls wait for what the editor may take: they end.
		change = EditorCategories
	}
	_ = a.editorChanged(r.Context(), id, change) // ends no sessions
	a.log.InfoContext(r.Context(), "editor updated", "editor_id", id, "name", req.Name != nil, "categories", len(req.Categories))
	d, err := a.editorDetail(r, id)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, d)
	return nil
}

// releasedJSON is the claim a disable revoked.
type releasedJSON struct {
	TaskID int64 `json:"task_id"`
	// Fence is the fence of the revoked claim; the task's fence is now past it.
	Fence int64 `json:"fence"`
}

type disableEditorResponse struct {
	editorDetailJSON
	// Released is the claim the disable revoked (the first, when it revoked
	// several), or null.
	Released *releasedJSON `json:"released"`
	// ReleasedAll are every claim the disable revoked, when it revoked more
	// than one; omitted otherwise.
	ReleasedAll []releasedJSON `json:"released_all,omitempty"`
}

// disableEditor disables an editor: its token is refused from now on, the store
// refuses it any claim, the claim it held goes back to the pool with its
// fence bumped, and its page sessions end (Config.Sessions). It answers with
// the editor and the claim it revoked; 503 when the sessions could not be
// ended (disabling again is safe).
func (a *api) disableEditor(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	revoked, err := a.d.DisableEditor(r.Context(), id)
	if err != nil {
		return editorNotFound(err, id)
	}
	// Its sessions end here, not only fail while it is disabled: enabling it
	// again brings none back.
	if err := a.editorChanged(r.Context(), id, EditorDisabled); err != nil {
		a.log.WarnContext(r.Context(), "end a disabled editor's sessions", "editor_id", id, "err", err)
		return errorf(http.StatusServiceUnavailable, codeUnavailable, "editor %d is disabled, but its signed-in sessions could not be ended; disable it again", id)
	}
	d, err := a.editorDetail(r, id)
	if err != nil {
		return err
	}
	out := disableEditorResponse{editorDetailJSON: *d}
	if len(revoked) > 0 {
		out.Released = &releasedJSON{TaskID: revoked[0].TaskID, Fence: revoked[0].Fence}
	}
	if len(revoked) > 1 {
		for _, rv := range revoked {
			out.ReleasedAll = append(out.ReleasedAll, releasedJSON{TaskID: rv.TaskID, Fence: rv.Fence})
		}
	}
	a.log.InfoContext(r.Context(), "editor disabled", "editor_id", id, "released", out.Released != nil)
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// enableEditor enables a disabled editor: its token is good again and it may
// claim. It answers with the editor.
func (a *api) enableEditor(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	if err := a.store.EnableEditor(r.Context(), id); err != nil {
		return editorNotFound(err, id)
	}
	_ = a.editorChanged(r.Context(), id, EditorEnabled) // ends no sessions
	a.log.InfoContext(r.Context(), "editor enabled", "editor_id", id)
	d, err := a.editorDetail(r, id)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, d)
	return nil
}

type newTokenResponse struct {
	ID int64 `json:"id"`
	// Token is shown here once; the store keeps only its hash.
	Token string `json:"token"`
}

// newEditorToken gives an editor a new token, answered once; the old one is
// refused from now on (by other processes once they forget it, within
// Config.EditorCacheTTL), and the editor's page sessions end. The editor's
// claim is kept.
func (a *api) newEditorToken(w http.ResponseWriter, r *http.Request) error {
	id, err := pathID(r, "id")
	if err != nil {
		return err
	}
	if err := decode(w, r, &struct{}{}, true); err != nil {
		return err
	}
	token, hash := tasks.NewToken()
	if err := a.store.SetEditorToken(r.Context(), id, hash); err != nil {
		return editorNotFound(err, id)
	}
	// A session that could not be ended here is refused anyway, as it holds
	// the old token's hash, and the pages end it on its next call: the new
	// token is answered all the same, as it is shown only once.
	if err := a.editorChanged(r.Context(), id, EditorToken); err != nil {
		a.log.WarnContext(r.Context(), "end the sessions of an editor's old token", "editor_id", id, "err", err)
	}
	a.tokenMade(r.Context(), hash)
	a.log.InfoContext(r.Context(), "editor token replaced", "editor_id", id)
	a.writeJSON(w, r, http.StatusOK, newTokenResponse{ID: id, Token: token})
	return nil
}

// meJSON is an editor's view of itself: GET /v1/me.
type meJSON struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	Categories []string `json:"categories"`
	CreatedAt  string   `json:"created_at"`
	editorWorkJSON
	// Assignment is the editor's live claim (its oldest, when it holds
	// several: GET /v1/assignments lists them), as POST /v1/assignments/next
	// answers it, or null.
	Assignment *assignmentJSON `json:"assignment"`
	Today      countsJSON      `json:"today"`
	editorStatsJSON
}

// me answers an editor with its profile, its assignment and its stats, read
// anew from the store.
func (a *api) me(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	if _, err := query(r); err != nil {
		return err
	}
	s, err := a.store.GetEditorSummary(r.Context(), e.ID)
	if err != nil {
		// Deleted in the database since its token was remembered.
		return editorNotFound(err, e.ID)
	}
	var assignment *assignmentJSON
	held, err := a.store.HeldByEditor(r.Context(), e.ID)
	switch {
	case err == nil:
		if assignment, err = a.assignmentOf(r.Context(), held); err != nil {
			return err
		}
	case !errors.Is(err, tasks.ErrNotFound):
		return err
	}
	loads, err := a.store.EditorLoads(r.Context(), []int64{e.ID})
	if err != nil {
		return err
	}
	st, err := a.store.GetEditorStats(r.Context(), e.ID)
	if err != nil {
		return err
	}
	ed := editorOf(s)
	ed.withLoad(loads[e.ID])
	a.writeJSON(w, r, http.StatusOK, meJSON{
		ID: ed.ID, Name: ed.Name, Categories: ed.Categories, CreatedAt: ed.CreatedAt, editorWorkJSON: ed.editorWorkJSON,
		Assignment: assignment, Today: countsOf(st.Today), editorStatsJSON: editorStatsOf(st),
	})
	return nil
}
