// Package web serves taskd's pages: the editor's workspace at /, and the
// admin's ops console at /ops, each with its sign-in and sign-out. Pages are
// server-rendered html/template with a little JavaScript and CSS, all
// embedded in the binary; there is no build step. The workspace's JSON calls
// go to /app/v1/..., which runs the API's own handlers (internal/api) for
// the signed-in editor, so claims are fenced exactly as for any API client;
// the console's go to /ops/v1/..., which runs the API's admin handlers.
//
// It sits beside internal/api, the HTTP API, in front of it: requests the
// pages do not serve go to the API's handler (Config.API), and the pages
// read and write nothing but through it and the sessions in Redis. The
// engine (package taskd, Engine.HTTPHandler) builds both.
//
// Security: every answer carries a strict Content-Security-Policy (no inline
// script or style), X-Content-Type-Options: nosniff, frame-ancestors 'none'
// and Referrer-Policy: same-origin (no address leaves the site). Signing in
// exchanges the editor's token (or, at /ops, the admin token) for a session
// cookie (HttpOnly, SameSite=Strict, Secure over TLS) that names a session
// kept in Redis; every state-changing request made with the cookie must
// carry the session's CSRF token. Editors' and the admin's sessions are of
// two kinds, under two cookies and two Redis key spaces: neither passes for
// the other.
//
// Why Redis and not a signed cookie: a session in Redis ends everywhere the
// moment its editor signs out, and its idle time is extended on the server
// with each request (never past Config.SessionLifetime after sign in),
// without a secret to share and rotate between replicas. The session keeps
// the SHA-256 of the editor's token, never the token, and the editor's
// session epoch its sign-in read; a new token for the editor, or disabling
// it, ends its sessions (the API calls EditorSessions), a session begun
// before the editor's latest disable is refused by the API whatever its
// state, and a session the API refuses is ended at its next call. An ops session
// keeps an HMAC keyed by the admin token over its own id, which Redis does
// not hold, so a new admin token ends them, and nothing in Redis opens the
// console alone.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/api"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Defaults.
const (
	// SessionIdleDefault is how long a session lives without use when
	// Config.SessionIdle is zero.
	SessionIdleDefault = 8 * time.Hour
	// SessionLifetimeDefault is how long a session lives at most when
	// Config.SessionLifetime is zero.
	SessionLifetimeDefault = 24 * time.Hour
	// CookieName is the session cookie's name.
	CookieName = "taskd_session"
	// CSRFHeader carries the session's CSRF token on the pages' JSON calls.
	CSRFHeader = "X-CSRF-Token"
)

// contentSecurityPolicy allows the page's own scripts, styles, images and
// JSON calls, and nothing else: no inline script or style, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// Config configures the pages.
type Config struct {
	// API is the API's handler (api.New). Requests the pages do not serve
	// go to it, and the pages' JSON calls run through it. Required.
	API http.Handler
	// Redis keeps the sessions. Required.
	Redis redis.UniversalClient
	// KeyPrefix starts the sessions' Redis keys (the engine's Redis key
	// prefix).
	KeyPrefix string
	// SessionIdle is how long a session lives without a request: each
	// request made with it sets its end SessionIdle from then (it does not
	// add SessionIdle to what is left), never past SessionLifetime after
	// its sign-in. Default SessionIdleDefault.
	SessionIdle time.Duration
	// SessionLifetime is how long a session lives at most, however much it
	// is used: then its browser signs in again. Default
	// SessionLifetimeDefault.
	SessionLifetime time.Duration
	// SecureCookie marks the session cookie Secure even for requests that
	// did not come over TLS: for a server behind a TLS-terminating proxy.
	// Requests over TLS always get a Secure cookie.
	SecureCookie bool
	// TraceURL is the address of a trace in a tracing backend's view, with
	// {trace_id} standing for the trace id: the ops console's task detail
	// links each claim's trace id there. Empty (the default): trace ids are
	// shown as text. The engine's Config has checked it.
	TraceURL string
	// Logger receives the pages' logs. Default slog.Default().
	Logger *slog.Logger
}

// Handler serves the pages and hands every other request to the API.
type Handler struct {
	api     http.Handler
	editors *door // the workspace's sign-in
	admin   *door // the ops console's
	secure  bool
	trace   string // Config.TraceURL
	log     *slog.Logger
	pages   *template.Template
	version string // of the static files, in their URLs
	mux     *http.ServeMux
}

// New validates cfg and returns the pages' handler.
func New(cfg Config) (*Handler, error) {
	switch {
	case cfg.API == nil:
		return nil, errors.New("web: API is required")
	case cfg.Redis == nil:
		return nil, errors.New("web: Redis is required")
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = SessionIdleDefault
	}
	if cfg.SessionLifetime == 0 {
		cfg.SessionLifetime = SessionLifetimeDefault
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pages, err := template.ParseFS(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	h := &Handler{
		api:    cfg.API,
		secure: cfg.SecureCookie,
		trace:  cfg.TraceURL,
		log:    cfg.Logger,
		pages:  pages,
		mux:    http.NewServeMux(),
	}
	es := editorSessions(cfg.Redis, cfg.KeyPrefix)
	es.idle, es.lifetime = cfg.SessionIdle, cfg.SessionLifetime
	h.editors = h.editorDoor(es)
	h.admin = h.adminDoor(&sessions{
		rdb: cfg.Redis, prefix: cfg.KeyPrefix + "web:ops-session:", kind: kindAdmin,
		idle: cfg.SessionIdle, lifetime: cfg.SessionLifetime, now: time.Now,
	})
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	if h.version, err = version(static); err != nil {
		return nil, fmt.Errorf("web: %w", err)
	}
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", staticFiles(static)))
	h.mux.HandleFunc("GET /{$}", h.home(h.editors))
	h.mux.HandleFunc("POST /signin", h.signIn(h.editors))
	h.mux.HandleFunc("POST /signout", h.signOut(h.editors))
	toHome := func(w http.ResponseWriter, r *http.Request) { seeOther(w, r, "/") }
	h.mux.HandleFunc("GET /signin", toHome)
	h.mux.HandleFunc("GET /signout", toHome)
	h.mux.HandleFunc("GET /app/v1/me", h.call)
	h.mux.HandleFunc("GET /app/v1/assignments", h.call)
	h.mux.HandleFunc("POST /app/v1/assignments/next", h.call)
	h.mux.HandleFunc("POST /app/v1/assignments/{task}/{op}", h.call)
	h.mux.HandleFunc("GET /app/v1/assignments/{task}/earlier", h.call)
	h.mux.HandleFunc("GET /app/v1/me/instructions", h.call)
	h.mux.HandleFunc("GET /app/v1/me/time", h.call)
	h.mux.HandleFunc("POST /app/v1/me/instructions/{category}/ack", h.call)
	h.opsRoutes()
	return h, nil
}

// ServeHTTP serves the pages' routes and hands the rest to the API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern == "" {
		h.api.ServeHTTP(w, r)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.mux.ServeHTTP(w, r)
}

// staticFiles serves the embedded files, never a directory listing. Their
// URLs carry the files' version (?v=), so a file may be cached for long; any
// other answer (a 404 for a file that is not there, perhaps not yet on this
// replica during a rollout) is never stored.
func staticFiles(static fs.FS) http.Handler {
	files := http.FileServerFS(static)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "" || strings.HasSuffix(r.URL.Path, "/") {
			w.Header().Set("Cache-Control", "no-store")
			http.NotFound(w, r)
			return
		}
		files.ServeHTTP(&cacheByStatus{ResponseWriter: w}, r)
	})
}

// cacheByStatus sets Cache-Control as the status is written: long and
// immutable for a file (200, 304), no-store for anything else.
type cacheByStatus struct {
	http.ResponseWriter
	wrote bool
}

func (c *cacheByStatus) WriteHeader(status int) {
	if !c.wrote {
		c.wrote = true
		if status == http.StatusOK || status == http.StatusNotModified {
			c.Header().Set("Cache-Control", "public, max-age=604800, immutable")
		} else {
			c.Header().Set("Cache-Control", "no-store")
		}
	}
	c.ResponseWriter.WriteHeader(status)
}

func (c *cacheByStatus) Write(b []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	return c.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (c *cacheByStatus) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// seeOther redirects r to path (303). The answer is never stored: it may
// set or clear a session cookie, and where it leads depends on the session.
func seeOther(w http.ResponseWriter, r *http.Request, path string) {
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// version returns a short hash of the static files' contents.
func version(static fs.FS) (string, error) {
	sum := sha256.New()
	err := fs.WalkDir(static, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, path)
		if err != nil {
			return err
		}
		_, _ = sum.Write([]byte(path))
		_, _ = sum.Write(b)
		return nil
	})
	return hex.EncodeToString(sum.Sum(nil))[:12], err
}

// hashID is the hex SHA-256 of a session id: Redis never holds the id
// itself.
func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// page is what the templates get.
type page struct {
	Version string // of the static files
	Editor  string
	CSRF    string
	Error   string
	SignIn  *signInText // on the sign-in page, and for the workspace's form once its session ends
	// TraceURL is Config.TraceURL, for the ops console's trace links.
	TraceURL string
}

func (h *Handler) render(w http.ResponseWriter, status int, name string, p page) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	p.Version, p.TraceURL = h.version, h.trace
	if err := h.pages.ExecuteTemplate(w, name, p); err != nil {
		h.log.Warn("web: render page", "page", name, "error", err)
	}
}

// sameOrigin reports whether r was sent by a page of this server, as the
// browser's Sec-Fetch-Site (or, without it, Origin) says. It guards sign-in
// and sign-out against cross-site forms; a request with neither header does
// not come from a browser page.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "same-origin", "none":
		return true
	case "":
	default:
		return false
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		return err == nil && u.Host == r.Host
	}
	return true
}

// meAnswer is the part of GET /v1/me that sign-in needs.
type meAnswer struct {
	ID   int64  `json:"id"`
	Name string `json:"name"`
}

// taskOps are the assignment operations the pages may call.
var taskOps = map[string]bool{"heartbeat": true, "submit": true, "release": true}

var digits = regexp.MustCompile(`^[1-9][0-9]{0,18}$`)

// call runs one of the API's editor routes for the session's editor: the
// path without its /app prefix, authenticated by the session, never by a
// header the browser sent. State-changing calls need the CSRF header. A
// session the API refuses (the editor's token has changed, or the editor was
// disabled since its sign-in: 401; the editor is disabled: 403
// editor_disabled) is ended, and its cookie cleared.
func (h *Handler) call(w http.ResponseWriter, r *http.Request) {
	if op := r.PathValue("op"); op != "" && (!taskOps[op] || !digits.MatchString(r.PathValue("task"))) {
		writeError(w, http.StatusNotFound, "not_found", "no route for "+r.Method+" "+r.URL.Path)
		return
	}
	id, s, ok := h.callSession(h.editors, w, r)
	if !ok {
		return
	}
	ctx := api.WithEditorSession(r.Context(), api.EditorSession{TokenHash: s.TokenHash, Epoch: s.Epoch})
	req := r.Clone(ctx)
	// A category may hold any character, "/" too: its escaped form is kept.
	req.URL.Path = strings.TrimPrefix(r.URL.Path, "/app")
	req.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, "/app")
	req.RequestURI = req.URL.RequestURI()
	req.Header.Del("Authorization")
	req.Header.Del("Cookie")
	ew := h.endOnRefusal(h.editors, w, r, id)
	h.api.ServeHTTP(ew, req)
	ew.finish()
}

// writeError writes the API's JSON error shape.
func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": message}})
}

// apiMessage returns the message of an API error body.
func apiMessage(body []byte) string {
	if m := apiErrorOf(body).Message; m != "" {
		return m
	}
	return "refused"
}

// apiErrorOf returns the code and message of an API error body, empty when
// it is none.
func apiErrorOf(body []byte) (e struct{ Code, Message string }) {
	var b struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &b) == nil {
		e.Code, e.Message = b.Error.Code, b.Error.Message
	}
	return e
}
