package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/markdown"
	"github.com/taskd/taskd/tasks"
)

// InstructionsStore is what the API reads and writes of the categories'
// instructions (see Store).
type InstructionsStore interface {
	SetInstructions(ctx context.Context, category, body, source string) (tasks.Instructions, bool, error)
	Instructions(ctx context.Context, category string, version int) (*tasks.Instructions, error)
	InstructionVersions(ctx context.Context, category string) ([]tasks.Instructions, error)
	LatestInstructions(ctx context.Context) (map[string]int, error)
	ConfirmInstructions(ctx context.Context, editorID int64, category string, version int) error
	EditorInstructions(ctx context.Context, editorID int64, categories []string) ([]tasks.EditorInstructions, error)
	UnconfirmedInstructions(ctx context.Context, editorID int64, categories []string) ([]string, error)
}

// HeaderInstructionsPending names, on an editor's answer to
// POST /v1/assignments/next or a submit, the categories its claim left out
// because the editor has not confirmed their current instructions: each
// percent-encoded (as in a query string), separated by commas.
const HeaderInstructionsPending = "Taskd-Instructions-Pending"

// codeInstructionsChanged refuses the confirmation of a version that is no
// longer the category's current one.
const codeInstructionsChanged = "instructions_changed"

// instructionsJSON is one version of a category's instructions.
type instructionsJSON struct {
	Category  string `json:"category"`
	Version   int    `json:"version"`
	Markdown  string `json:"markdown"`
	HTML      string `json:"html"`
	Source    string `json:"source"`
	CreatedAt string `json:"created_at"`
}

type setInstructionsRequest struct {
	Markdown *string `json:"markdown"`
}

type setInstructionsJSON struct {
	instructionsJSON
	// Changed says whether this request made a new version (false: the text
	// was the current version's).
	Changed bool `json:"changed"`
}

type instructionVersionJSON struct {
	Version   int    `json:"version"`
	Source    string `json:"source"`
	CreatedAt string `json:"created_at"`
}

type instructionVersionsJSON struct {
	Category string                   `json:"category"`
	Versions []instructionVersionJSON `json:"versions"`
}

type myInstructionsJSON struct {
	Category  string `json:"category"`
	Version   int    `json:"version"`
	Confirmed int    `json:"confirmed_version"`
	Pending   bool   `json:"pending"`
	HTML      string `json:"html"`
	CreatedAt string `json:"created_at"`
}

type ackRequest struct {
	Version *int `json:"version"`
}

func instructionsOf(in *tasks.Instructions) (instructionsJSON, error) {
	html, err := markdown.Render(in.Body)
	if err != nil {
		return instructionsJSON{}, err
	}
	return instructionsJSON{Category: in.Category, Version: in.Version, Markdown: in.Body, HTML: string(html),
		Source: in.Source, CreatedAt: formatTime(in.CreatedAt)}, nil
}

// setInstructions makes the body's Markdown the category's instructions: a
// new version unless it is the current version's text. Every editor of the
// category confirms the new version before its next claim of it.
func (a *api) setInstructions(w http.ResponseWriter, r *http.Request) error {
	cat := r.PathValue("category")
	var req setInstructionsRequest
	if err := decode(w, r, &req, false); err != nil {
		return err
	}
	if req.Markdown == nil {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "markdown is required (an empty string clears the instructions)")
	}
	in, changed, err := a.store.SetInstructions(r.Context(), cat, *req.Markdown, tasks.InstructionsFromAPI)
	if err != nil {
		return err
	}
	if changed {
		a.instr.forget()
		a.log.InfoContext(r.Context(), "instructions set", "category", cat, "version", in.Version)
	}
	out, err := instructionsOf(&in)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, setInstructionsJSON{instructionsJSON: out, Changed: changed})
	return nil
}

// getInstructions answers with the category's current instructions, or the
// version the query names; 404 when it has none.
func (a *api) getInstructions(w http.ResponseWriter, r *http.Request) error {
	q, err := query(r, "version")
	if err != nil {
		return err
	}
	version := 0
	if s, ok := q["version"]; ok {
		if version, err = strconv.Atoi(s); err != nil || version < 1 {
			return errorf(http.StatusUnprocessableEntity, codeInvalid, "version must be a positive integer, not %q", s)
		}
	}
	in, err := a.store.Instructions(r.Context(), r.PathValue("category"), version)
	if errors.Is(err, tasks.ErrNotFound) {
		return errorf(http.StatusNotFound, codeNotFound, "category %q has no instructions of that version", r.PathValue("category"))
	}
	if err != nil {
		return err
	}
	out, err := instructionsOf(in)
	if err != nil {
		return err
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// instructionVersions lists the versions of the category's instructions,
// newest first; empty when it has none.
func (a *api) instructionVersions(w http.ResponseWriter, r *http.Request) error {
	if _, err := query(r); err != nil {
		return err
	}
	cat := r.PathValue("category")
	vs, err := a.store.InstructionVersions(r.Context(), cat)
	if err != nil {
		return err
	}
	out := instructionVersionsJSON{Category: cat, Versions: make([]instructionVersionJSON, len(vs))}
	for i, v := range vs {
		out.Versions[i] = instructionVersionJSON{Version: v.Version, Source: v.Source, CreatedAt: formatTime(v.CreatedAt)}
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// myInstructions answers with the current instructions of the editor's
// categories that have some, each with the version the editor confirmed.
func (a *api) myInstructions(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	if _, err := query(r); err != nil {
		return err
	}
	eis, err := a.store.EditorInstructions(r.Context(), e.ID, e.Categories)
	if err != nil {
		return err
	}
	out := struct {
		Instructions []myInstructionsJSON `json:"instructions"`
	}{Instructions: make([]myInstructionsJSON, 0, len(eis))}
	for _, ei := range eis {
		html, err := markdown.Render(ei.Body)
		if err != nil {
			return err
		}
		out.Instructions = append(out.Instructions, myInstructionsJSON{Category: ei.Category, Version: ei.Version,
			Confirmed: ei.Confirmed, Pending: ei.Pending(), HTML: string(html), CreatedAt: formatTime(ei.CreatedAt)})
	}
	a.writeJSON(w, r, http.StatusOK, out)
	return nil
}

// confirmInstructions records that the editor read the category's current
// instructions, of the version the body names: its next claim may take the
// category again. An older version is refused (409 instructions_changed), a
// category not the editor's or without that version is 404.
func (a *api) confirmInstructions(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error {
	cat := r.PathValue("category")
	var req ackRequest
	if err := decode(w, r, &req, false); err != nil {
		return err
	}
	if req.Version == nil || *req.Version < 1 {
		return errorf(http.StatusUnprocessableEntity, codeInvalid, "version is required: a positive integer")
	}
	if !slices.Contains(e.Categories, cat) {
		return errorf(http.StatusNotFound, codeNotFound, "category %q is not one of yours", cat)
	}
	cur, err := a.store.Instructions(r.Context(), cat, 0)
	if errors.Is(err, tasks.ErrNotFound) {
		return errorf(http.StatusNotFound, codeNotFound, "category %q has no instructions", cat)
	}
	if err != nil {
		return err
	}
	switch {
	case *req.Version > cur.Version:
		return errorf(http.StatusNotFound, codeNotFound, "category %q has no version %d of its instructions", cat, *req.Version)
	case *req.Version < cur.Version:
		return errorf(http.StatusConflict, codeInstructionsChanged,
			"the instructions of %q changed: version %d is current; read it and confirm it", cat, cur.Version)
	}
	if err := a.store.ConfirmInstructions(r.Context(), e.ID, cat, cur.Version); err != nil {
		return err
	}
	a.log.InfoContext(r.Context(), "instructions confirmed", "editor_id", e.ID, "category", cat, "version", cur.Version)
	a.writeJSON(w, r, http.StatusOK, struct {
		Category string `json:"category"`
		Version  int    `json:"confirmed_version"`
	}{cat, cur.Version})
	return nil
}

// confirmedCategories returns those of the editor's categories its next claim
// may take: all but those whose current instructions it has not confirmed,
// which it names in the answer's HeaderInstructionsPending. A deployment
// without instructions pays one read of LatestInstructions per
// instructionsCacheTTL and process, and nothing per claim.
func (a *api) confirmedCategories(ctx context.Context, w http.ResponseWriter, e *tasks.Editor) ([]string, error) {
	latest, err := a.instr.latest(ctx, a.store)
	if err != nil {
		return nil, dispatcher.Unavailable(err)
	}
	if !slices.ContainsFunc(e.Categories, func(c string) bool { return latest[c] > 0 }) {
		return e.Categories, nil
	}
	pending, err := a.store.UnconfirmedInstructions(ctx, e.ID, e.Categories)
	if err != nil {
		return nil, dispatcher.Unavailable(err)
	}
	if len(pending) == 0 {
		return e.Categories, nil
	}
	names := make([]string, len(pending))
	for i, c := range pending {
		names[i] = url.QueryEscape(c)
	}
	w.Header().Set(HeaderInstructionsPending, strings.Join(names, ","))
	return slices.DeleteFunc(slices.Clone(e.Categories), func(c string) bool { return slices.Contains(pending, c) }), nil
}

// instructionsCacheTTL is how long a process trusts its read of which
// categories have instructions: a version set through another process holds
// back its editors' claims within it; one set through this process, at once.
const instructionsCacheTTL = 5 * time.Second

// instructionsCache remembers LatestInstructions for instructionsCacheTTL.
// No lock is held while the store is read; a read that began before forget
// is not kept.
type instructionsCache struct {
	mu   sync.Mutex
	at   time.Time
	vers map[string]int
	gen  uint64 // bumped by forget
}

func (c *instructionsCache) latest(ctx context.Context, s InstructionsStore) (map[string]int, error) {
	c.mu.Lock()
	vers, fresh, gen := c.vers, c.vers != nil && time.Since(c.at) < instructionsCacheTTL, c.gen
	c.mu.Unlock()
	if fresh {
		return vers, nil
	}
	vers, err := s.LatestInstructions(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.gen == gen {
		c.vers, c.at = vers, time.Now()
	}
	c.mu.Unlock()
	return vers, nil
}

func (c *instructionsCache) forget() {
	c.mu.Lock()
	c.vers = nil
	c.gen++
	c.mu.Unlock()
}
