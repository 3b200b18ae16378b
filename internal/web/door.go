package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/tasks"
)

// A door is one of the pages' ways in: the editor's workspace at /, and the
// ops console at /ops for the admin. Each has its own session cookie, cookie
// path, Redis key space and pages, so that a session of one kind is no
// session at the other door.
type door struct {
	cookie   string // the session cookie's name
	path     string // the door's page, and its cookie's path
	sessions *sessions
	// signIn is what the sign-in page (signin.html) says at this door;
	// appPage is the template for a signed-in browser.
	signIn  signInText
	appPage string
	// emptyToken is what the sign-in page says to an empty token.
	emptyToken string
	// admit asks the API whether token, posted by r, opens the door. It
	// returns the session to start under id, or the status and message for
	// the sign-in page (and sets Retry-After on w when the API throttles r's
	// address).
	admit func(w http.ResponseWriter, r *http.Request, token, id string) (*session, int, string)
}

// signInText is what a door's sign-in page says.
type signInText struct {
	Title  string // the page's title
	Area   string // after "taskd" in the heading, if not empty
	Intro  string
	Action string // where the form posts
	Label  string // the token field's label
}

// recovering is what a page says while a store cannot be reached.
const recovering = "The service is recovering; try again in a moment."

// editorDoor is the workspace's: an editor's token, checked by GET /v1/me.
func (h *Handler) editorDoor(s *sessions) *door {
	return &door{
		cookie: CookieName, path: "/", sessions: s,
		signIn: signInText{
			Title: "Sign in · taskd", Intro: "Sign in with your editor token.",
			Action: "/signin", Label: "Editor token",
		},
		appPage:    "workspace.html",
		emptyToken: "Enter your editor token.",
		admit: func(w http.ResponseWriter, r *http.Request, token, _ string) (*session, int, string) {
			// The API fills es from the same read of the editor that let
			// the token through: its epoch predates any disable that
			// commits after, even one that commits before the session is
			// stored.
			var es api.EditorSession
			rec := h.ask(r.WithContext(api.WithSignIn(r.Context(), &es)), "/v1/me", token)
			var me meAnswer
			switch {
			case rec.status == http.StatusTooManyRequests:
				status, message := throttled(w, rec)
				return nil, status, message
			case rec.status == http.StatusOK && es.TokenHash == tasks.HashToken(token) && json.Unmarshal(rec.body.Bytes(), &me) == nil:
				return &session{EditorID: me.ID, EditorName: me.Name, TokenHash: es.TokenHash, Epoch: es.Epoch}, 0, ""
			case rec.status == http.StatusUnauthorized:
				return nil, http.StatusUnauthorized, "That token is not an editor's token."
			case rec.status == http.StatusForbidden && apiErrorOf(rec.body.Bytes()).Code == "forbidden":
				// The API's only other 403 here is editor_disabled.
				return nil, http.StatusForbidden, "That is the admin token: it opens the ops console at " + opsPath + ", not the workspace."
			case rec.status == http.StatusForbidden:
				return nil, http.StatusForbidden, "This token cannot sign in here: " + apiMessage(rec.body.Bytes())
			}
			return nil, http.StatusServiceUnavailable, recovering
		},
	}
}

// adminDoor is the ops console's: the admin token, checked by an admin
// route.
func (h *Handler) adminDoor(s *sessions) *door {
	return &door{
		cookie: OpsCookieName, path: opsPath, sessions: s,
		signIn: signInText{
			Title: "Sign in · taskd ops", Area: "ops", Intro: "Sign in with the admin token to watch and steer the pool.",
			Action: opsPath + "/signin", Label: "Admin token",
		},
		appPage:    "ops.html",
		emptyToken: "Enter the admin token.",
		admit: func(w http.ResponseWriter, r *http.Request, token, id string) (*session, int, string) {
			rec := h.ask(r, "/v1/admin/categories/paused", token)
			switch rec.status {
			case http.StatusTooManyRequests:
				status, message := throttled(w, rec)
				return nil, status, message
			case http.StatusOK:
				return &session{MAC: api.AdminSessionMAC(token, id)}, 0, ""
			case http.StatusUnauthorized:
				return nil, http.StatusUnauthorized, "That is not the admin token."
			case http.StatusForbidden:
				return nil, http.StatusForbidden, "That is an editor's token: it opens the editor workspace at /, not the console."
			}
			return nil, http.StatusServiceUnavailable, recovering
		},
	}
}

// ask sends GET path to the API in-process with token as the bearer token,
// for the sign-in r: a wrong token counts against r's address, under r's
// route, as at the API (see api.WithRoute).
func (h *Handler) ask(r *http.Request, path, token string) *recorder {
	rec := newRecorder()
	req, err := http.NewRequestWithContext(api.WithRoute(r.Context(), r.Method+" "+r.URL.Path), http.MethodGet, path, nil)
	if err != nil {
		rec.WriteHeader(http.StatusInternalServerError)
		return rec
	}
	// The API finds the browser's address as for its own requests: from the
	// connection, or from a trusted proxy's forwarding header.
	req.RemoteAddr = r.RemoteAddr
	for _, name := range []string{"X-Forwarded-For", "Forwarded"} {
		if v := r.Header.Values(name); len(v) > 0 {
			req.Header[name] = v
		}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	h.api.ServeHTTP(rec, req)
	return rec
}

// throttled passes on the API's 429 to a sign-in from an address that sent
// too many wrong tokens: the status and message for the sign-in page.
func throttled(w http.ResponseWriter, rec *recorder) (int, string) {
	after := rec.header.Get("Retry-After")
	w.Header().Set("Retry-After", after)
	return http.StatusTooManyRequests, "Too many wrong tokens from your address. Try again in " + after + " seconds."
}

// session returns the request's session at d, errNoSession without one.
func (h *Handler) session(d *door, r *http.Request) (string, *session, error) {
	c, err := r.Cookie(d.cookie)
	if err != nil {
		return "", nil, errNoSession
	}
	s, err := d.sessions.get(r.Context(), c.Value)
	return c.Value, s, err
}

func (h *Handler) setCookie(d *door, w http.ResponseWriter, r *http.Request, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     d.cookie,
		Value:    value,
		Path:     d.path,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   h.secure || r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
}

// home serves d's page to a signed-in browser, else the sign-in page.
func (h *Handler) home(d *door) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, s, err := h.session(d, r)
		switch {
		case errors.Is(err, errNoSession):
			h.signInPage(w, d, http.StatusOK, "")
		case err != nil:
			h.log.WarnContext(r.Context(), "web: session", "door", d.path, "error", err)
			w.Header().Set("Retry-After", "2")
			h.signInPage(w, d, http.StatusServiceUnavailable, recovering)
		default:
			h.render(w, http.StatusOK, d.appPage, page{Editor: s.EditorName, CSRF: s.CSRF, SignIn: &d.signIn})
		}
	}
}

// signInPage renders d's sign-in page with status and message, if any.
func (h *Handler) signInPage(w http.ResponseWriter, d *door, status int, message string) {
	h.render(w, status, "signin.html", page{SignIn: &d.signIn, Error: message})
}

// signIn checks the posted token with d.admit and starts a session; the
// session this browser had at d, if any, ends.
func (h *Handler) signIn(d *door) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			h.signInPage(w, d, http.StatusForbidden, "Sign in from this site's own page.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 4096)
		token := strings.TrimSpace(r.PostFormValue("token"))
		if token == "" {
			h.signInPage(w, d, http.StatusUnprocessableEntity, d.emptyToken)
			return
		}
		id := randomToken()
		s, status, message := d.admit(w, r, token, id)
		if s == nil {
			if status == http.StatusServiceUnavailable {
				w.Header().Set("Retry-After", "2")
			}
			h.signInPage(w, d, status, message)
			return
		}
		if err := d.sessions.create(r.Context(), id, s); err != nil {
			h.log.WarnContext(r.Context(), "web: sign in", "door", d.path, "error", err)
			w.Header().Set("Retry-After", "2")
			h.signInPage(w, d, http.StatusServiceUnavailable, recovering)
			return
		}
		if old, err := r.Cookie(d.cookie); err == nil {
			if err := d.sessions.delete(r.Context(), old.Value); err != nil {
				h.log.WarnContext(r.Context(), "web: end the previous session", "door", d.path, "error", err)
			}
		}
		if s.Kind == kindAdmin {
			h.log.InfoContext(r.Context(), "web: signed in", "door", d.path, "who", "admin")
		} else {
			h.log.InfoContext(r.Context(), "web: signed in", "door", d.path, "editor_id", s.EditorID)
		}
		h.setCookie(d, w, r, id, 0)
		seeOther(w, r, d.path)
	}
}

// signOut deletes the session; the form carries its CSRF token.
func (h *Handler) signOut(d *door) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id, s, err := h.session(d, r)
		if err == nil {
			r.Body = http.MaxBytesReader(w, r.Body, 4096)
			if !sameOrigin(r) || !s.checkCSRF(r.PostFormValue("csrf")) {
				http.Error(w, "forbidden: missing or wrong CSRF token", http.StatusForbidden)
				return
			}
			if err := d.sessions.delete(r.Context(), id); err != nil {
				h.log.WarnContext(r.Context(), "web: sign out", "door", d.path, "error", err)
				http.Error(w, "the service is recovering; try again in a moment", http.StatusServiceUnavailable)
				return
			}
		}
		h.setCookie(d, w, r, "", -1)
		seeOther(w, r, d.path)
	}
}

// callSession returns the session of a JSON call at d, or answers the call
// itself (401 without a session, 503 when Redis cannot be reached, 403 for
// a state-changing call without the session's CSRF token) and returns false.
func (h *Handler) callSession(d *door, w http.ResponseWriter, r *http.Request) (string, *session, bool) {
	id, s, err := h.session(d, r)
	switch {
	case errors.Is(err, errNoSession):
		writeError(w, http.StatusUnauthorized, "unauthorized", "your session has ended; sign in again")
	case err != nil:
		h.log.WarnContext(r.Context(), "web: session", "door", d.path, "error", err)
		w.Header().Set("Retry-After", "2")
		writeError(w, http.StatusServiceUnavailable, "unavailable", "the service is recovering")
	case r.Method != http.MethodGet && !s.checkCSRF(r.Header.Get(CSRFHeader)):
		writeError(w, http.StatusForbidden, "csrf", "missing or wrong CSRF token")
	default:
		return id, s, true
	}
	return "", nil, false
}
