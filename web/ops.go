package web

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"

	"github.com/taskd/taskd/dispatcher/api"
)

// The ops console: /ops, for the admin. Signing in exchanges the admin token
// for a session of its own kind, under its own cookie and Redis key space:
// an editor's session is no session here, and the other way round. The
// console's JSON calls go to /ops/v1/..., which runs the API's admin routes
// for the session through api.WithAdminTokenHash: the session keeps the
// admin token's SHA-256, which the API compares with its own on every call,
// so once the admin token changes every console session stops working.

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
	toOps := func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, opsPath, http.StatusSeeOther) }
	h.mux.HandleFunc("GET "+opsPath, h.opsHome)
	h.mux.HandleFunc("GET "+opsPath+"/{$}", toOps)
	h.mux.HandleFunc("POST "+opsPath+"/signin", h.opsSignIn)
	h.mux.HandleFunc("POST "+opsPath+"/signout", h.opsSignOut)
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
		"GET /ops/v1/admin/categories/paused",
		"GET /ops/v1/editors",
		"GET /ops/v1/editors/{id}",
		"PATCH /ops/v1/editors/{id}",
	} {
		h.mux.HandleFunc(p, call(""))
	}
	h.mux.HandleFunc("POST /ops/v1/admin/tasks/{id}/{op}", call("task"))
	h.mux.HandleFunc("POST /ops/v1/admin/categories/{category}/{op}", call("category"))
	h.mux.HandleFunc("POST /ops/v1/editors/{id}/{op}", call("editor"))
}

// opsSession returns the request's ops session, errNoSession without one.
func (h *Handler) opsSession(r *http.Request) (string, *session, error) {
	c, err := r.Cookie(OpsCookieName)
	if err != nil {
		return "", nil, errNoSession
	}
	s, err := h.opsSess.get(r.Context(), c.Value)
	return c.Value, s, err
}

func (h *Handler) setOpsCookie(w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     OpsCookieName,
		Value:    value,
		Path:     opsPath,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   h.secure || r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

// opsHome serves the console to a signed-in admin, else its sign-in page.
func (h *Handler) opsHome(w http.ResponseWriter, r *http.Request) {
	_, s, err := h.opsSession(r)
	switch {
	case errors.Is(err, errNoSession):
		h.render(w, http.StatusOK, "ops-signin.html", page{})
	case err != nil:
		h.log.WarnContext(r.Context(), "web: ops session", "error", err)
		w.Header().Set("Retry-After", "2")
		h.render(w, http.StatusServiceUnavailable, "ops-signin.html", page{Error: "The service is recovering; try again in a moment."})
	default:
		h.render(w, http.StatusOK, "ops.html", page{CSRF: s.CSRF})
	}
}

// opsSignIn checks the admin token with the API (an admin route, in-process)
// and starts an ops session that keeps the token's SHA-256.
func (h *Handler) opsSignIn(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		h.render(w, http.StatusForbidden, "ops-signin.html", page{Error: "Sign in from this site's own page."})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		h.render(w, http.StatusUnprocessableEntity, "ops-signin.html", page{Error: "Enter the admin token."})
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/v1/admin/categories/paused", nil)
	if err != nil {
		h.render(w, http.StatusInternalServerError, "ops-signin.html", page{Error: "Sign-in failed."})
		return
	}
	req.Header.Set("Authorization", "Bearer "+token)
	rec := newRecorder()
	h.api.ServeHTTP(rec, req)
	switch rec.status {
	case http.StatusOK:
	case http.StatusUnauthorized:
		h.render(w, http.StatusUnauthorized, "ops-signin.html", page{Error: "That is not the admin token."})
		return
	case http.StatusForbidden:
		h.render(w, http.StatusForbidden, "ops-signin.html", page{Error: "That is an editor's token: editors sign in at /."})
		return
	default:
		w.Header().Set("Retry-After", "2")
		h.render(w, http.StatusServiceUnavailable, "ops-signin.html", page{Error: "The service is recovering; try again in a moment."})
		return
	}
	id, err := h.opsSess.create(r.Context(), &session{TokenHash: sha256.Sum256([]byte(token))})
	if err != nil {
		h.log.WarnContext(r.Context(), "web: ops sign in", "error", err)
		w.Header().Set("Retry-After", "2")
		h.render(w, http.StatusServiceUnavailable, "ops-signin.html", page{Error: "The service is recovering; try again in a moment."})
		return
	}
	if old, err := r.Cookie(OpsCookieName); err == nil {
		if err := h.opsSess.delete(r.Context(), old.Value); err != nil {
			h.log.WarnContext(r.Context(), "web: end the previous ops session", "error", err)
		}
	}
	h.log.InfoContext(r.Context(), "web: admin signed in to the ops console")
	h.setOpsCookie(w, r, id, 0)
	http.Redirect(w, r, opsPath, http.StatusSeeOther)
}

// opsSignOut deletes the ops session; the form carries its CSRF token.
func (h *Handler) opsSignOut(w http.ResponseWriter, r *http.Request) {
	id, s, err := h.opsSession(r)
	if err == nil {
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		if !sameOrigin(r) || !s.checkCSRF(r.PostFormValue("csrf")) {
			http.Error(w, "forbidden: missing or wrong CSRF token", http.StatusForbidden)
			return
		}
		if err := h.opsSess.delete(r.Context(), id); err != nil {
			h.log.WarnContext(r.Context(), "web: ops sign out", "error", err)
			http.Error(w, "the service is recovering; try again in a moment", http.StatusServiceUnavailable)
			return
		}
	}
	h.setOpsCookie(w, r, "", -1)
	http.Redirect(w, r, opsPath, http.StatusSeeOther)
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
	id, s, err := h.opsSession(r)
	if errors.Is(err, errNoSession) {
		writeError(w, http.StatusUnauthorized, "unauthorized", "your session has ended; sign in again")
		return
	}
	if err != nil {
		h.log.WarnContext(r.Context(), "web: ops session", "error", err)
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the service is recovering")
		return
	}
	if r.Method != http.MethodGet && !s.checkCSRF(r.Header.Get(CSRFHeader)) {
		writeError(w, http.StatusForbidden, "csrf", "missing or wrong CSRF token")
		return
	}
	req := r.Clone(api.WithAdminTokenHash(r.Context(), s.TokenHash))
	// A category may hold any character, "/" too: its escaped form is kept.
	req.URL.Path = strings.TrimPrefix(r.URL.Path, opsPath)
	req.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, opsPath)
	req.RequestURI = req.URL.RequestURI()
	req.Header.Del("Authorization")
	req.Header.Del("Cookie")
	h.api.ServeHTTP(&endOnRefusal{ResponseWriter: w, end: func() {
		if err := h.opsSess.delete(r.Context(), id); err != nil {
			h.log.WarnContext(r.Context(), "web: end a refused ops session", "error", err)
		}
		h.setOpsCookie(w, r, "", -1)
	}}, req)
}

// endOnRefusal runs end before an answer 401 Unauthorized goes out: the API
// refused the session for good.
type endOnRefusal struct {
	http.ResponseWriter
	end   func()
	wrote bool
}

func (e *endOnRefusal) WriteHeader(status int) {
	if !e.wrote {
		e.wrote = true
		if status == http.StatusUnauthorized {
			e.end()
		}
	}
	e.ResponseWriter.WriteHeader(status)
}

func (e *endOnRefusal) Write(b []byte) (int, error) {
	if !e.wrote {
		e.WriteHeader(http.StatusOK)
	}
	return e.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (e *endOnRefusal) Unwrap() http.ResponseWriter { return e.ResponseWriter }
