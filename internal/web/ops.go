package web

import (
	"net/http"
	"strings"

	"github.com/taskd/taskd/internal/api"
)

// The ops console: /ops, for the admin. Signing in exchanges the admin token
// for a session of its own kind, under its own cookie and Redis key space:
// an editor's session is no session here, and the other way round. The
// console's JSON calls go to /ops/v1/..., which runs the API's admin routes
// for the session through api.WithAdminSession: the session keeps an HMAC
// keyed by the admin token over its own id (api.AdminSessionMAC), which the
// API checks with its own token on every call, so once the admin token
// changes every console session stops working. Redis holds the id only
// hashed, so what it holds opens nothing alone.

// OpsCookieName is the ops console's session cookie; it is sent to /ops
// and below only.
const OpsCookieName = "taskd_ops"

// opsPath is the console's address, and its cookie's path.
const opsPath = "/ops"

// opsOps are the operations under /ops/v1 that name a task, a category or
// an editor and then an action, by route.
var opsOps = map[string]map[string]bool{
	"task":     {"release": true, "requeue": true, "cancel": true},
	"category": {"pause": true, "resume": true},
	"editor":   {"disable": true, "enable": true},
}

// opsRoutes adds the console's routes to h's mux.
func (h *Handler) opsRoutes() {
	toOps := func(w http.ResponseWriter, r *http.Request) { seeOther(w, r, opsPath) }
	h.mux.HandleFunc("GET "+opsPath, h.home(h.admin))
	h.mux.HandleFunc("GET "+opsPath+"/{$}", toOps)
	h.mux.HandleFunc("POST "+opsPath+"/signin", h.signIn(h.admin))
	h.mux.HandleFunc("POST "+opsPath+"/signout", h.signOut(h.admin))
	h.mux.HandleFunc("GET "+opsPath+"/signin", toOps)
	h.mux.HandleFunc("GET "+opsPath+"/signout", toOps)

	call := func(kind string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { h.opsCall(w, r, kind) }
	}
	for _, p := range []string{
		"GET /ops/v1/stats",
		"GET /ops/v1/stats/history",
		"GET /ops/v1/tasks",
		"GET /ops/v1/tasks/{id}",
		"GET /ops/v1/tasks/{id}/events",
		"GET /ops/v1/tasks/{id}/results",
		"GET /ops/v1/admin/categories/paused",
		"GET /ops/v1/admin/agreement",
		"GET /ops/v1/admin/categories/{category}/instructions",
		"PUT /ops/v1/admin/categories/{category}/instructions",
		"GET /ops/v1/admin/categories/{category}/instructions/versions",
		"GET /ops/v1/admin/gold",
		"DELETE /ops/v1/admin/gold/pauses/{editor}/{category}",
		"GET /ops/v1/editors",
		"POST /ops/v1/editors",
		"POST /ops/v1/tasks",
		"GET /ops/v1/editors/{id}",
		"GET /ops/v1/editors/{id}/time",
		"PATCH /ops/v1/editors/{id}",
		"POST /ops/v1/admin/tasks/requeue",
		"POST /ops/v1/admin/tasks/cancel",
	} {
		h.mux.HandleFunc(p, call(""))
	}
	h.mux.HandleFunc("POST /ops/v1/admin/tasks/{id}/{op}", call("task"))
	h.mux.HandleFunc("POST /ops/v1/admin/categories/{category}/{op}", call("category"))
	h.mux.HandleFunc("POST /ops/v1/editors/{id}/{op}", call("editor"))
}

// opsCall runs one of the API's admin routes for the session: the path
// without its /ops prefix, authenticated by the session's admin token hash,
// never by a header the browser sent. kind names the routes that end in an
// action (see opsOps). State-changing calls need the CSRF header. A session
// the API refuses (the admin token has changed) is ended.
func (h *Handler) opsCall(w http.ResponseWriter, r *http.Request, kind string) {
	if kind != "" && !opsOps[kind][r.PathValue("op")] {
		writeError(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path)
		return
	}
	id, s, ok := h.callSession(h.admin, w, r)
	if !ok {
		return
	}
	req := r.Clone(api.WithAdminSession(r.Context(), id, s.MAC))
	// A category may hold any character, "/" too: its escaped form is kept.
	req.URL.Path = strings.TrimPrefix(r.URL.Path, opsPath)
	req.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, opsPath)
	req.RequestURI = req.URL.RequestURI()
	req.Header.Del("Authorization")
	req.Header.Del("Cookie")
	ew := h.endOnRefusal(h.admin, w, r, id)
	h.api.ServeHTTP(ew, req)
	ew.finish()
}

// endOnRefusal returns w, which ends the session id at d, and clears its
// cookie, if the API refuses the session for good: 401 Unauthorized, or 403
// editor_disabled. Call its finish once the API has answered.
func (h *Handler) endOnRefusal(d *door, w http.ResponseWriter, r *http.Request, id string) *endOnRefusal {
	return &endOnRefusal{ResponseWriter: w, end: func() {
		if err := d.sessions.delete(r.Context(), id); err != nil {
			h.log.WarnContext(r.Context(), "web: end a refused session", "door", d.path, "error", err)
		}
		h.setCookie(d, w, r, "", -1)
	}}
}

// endOnRefusal runs end before an answer goes out that refuses the session
// for good: 401 Unauthorized, or 403 Forbidden whose error is
// editor_disabled (a disabled editor's session never works again, enabled
// or not). A 403 is held back until its body says which.
type endOnRefusal struct {
	http.ResponseWriter
	end   func()
	wrote bool
	held  bool // a 403 not yet written: its body decides
}

func (e *endOnRefusal) WriteHeader(status int) {
	if !e.wrote {
		e.wrote = true
		switch status {
		case http.StatusUnauthorized:
			e.end()
		case http.StatusForbidden:
			e.held = true
			return
		}
	}
	e.ResponseWriter.WriteHeader(status)
}

func (e *endOnRefusal) Write(b []byte) (int, error) {
	if !e.wrote {
		e.WriteHeader(http.StatusOK)
	}
	if e.held {
		if apiErrorOf(b).Code == "editor_disabled" { // the API writes an error in one piece
			e.end()
		}
		e.finish()
	}
	return e.ResponseWriter.Write(b)
}

// finish writes a 403 held back whose body never came.
func (e *endOnRefusal) finish() {
	if e.held {
		e.held = false
		e.ResponseWriter.WriteHeader(http.StatusForbidden)
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (e *endOnRefusal) Unwrap() http.ResponseWriter { return e.ResponseWriter }
