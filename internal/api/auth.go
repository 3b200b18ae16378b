package api

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/taskd/taskd/internal/aside"
	"github.com/taskd/taskd/tasks"
)

// maxTokenLen bounds the bearer tokens worth a look-up; editors' tokens are 43
// characters.
const maxTokenLen = 512

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// editorHandlerFunc is a handler for an authenticated editor.
type editorHandlerFunc func(w http.ResponseWriter, r *http.Request, e *tasks.Editor) error

// errRequestTimeout is the cause of a request's context once its time is up
// (Config.RequestTimeout).
var errRequestTimeout = errors.New("request timed out")

// handle adapts h to http.Handler, answering its error with writeError. The
// request's context ends after Config.RequestTimeout, with errRequestTimeout
// as its cause; a long poll's (see longPoll) is bounded by its handler instead,
// once it knows the wait.
func (a *api) handle(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !isLongPoll(r.Context()) {
			ctx, cancel := context.WithTimeoutCause(r.Context(), a.timeout, errRequestTimeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		if err := h(w, r); err != nil {
			a.writeError(w, r, err)
		}
	})
}

// longPollKey marks the context of a long-poll route.
type longPollKey struct{}

// longPoll marks the requests h handles as long polls, whose time is their
// wait plus Config.RequestTimeout: the handler sets it with withWait, and
// bounds what it does before (authentication, reading the body) by
// Config.RequestTimeout alone.
//
// A long poll ends as soon as Handler.Shutdown starts, answered 204 No
// Content ("nothing now, ask again") with Connection: close, so that it does
// not hold a graceful shutdown for up to its wait. A long poll cancelled
// while it was committing a claim may commit it without answering; that is
// safe, because asking again returns the claim an editor already holds.
func (a *api) longPoll(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.log.DebugContext(r.Context(), "assignment requested", "remote_addr", r.RemoteAddr)
		ctx, cancel := context.WithCancelCause(context.WithValue(r.Context(), longPollKey{}, true))
		defer cancel(nil)
		stop := context.AfterFunc(a.drain, func() { cancel(errShuttingDown) })
		defer stop()
		tw := &writeTracker{ResponseWriter: w}
		h.ServeHTTP(tw, r.WithContext(ctx))
		if !tw.wrote && errors.Is(context.Cause(ctx), errShuttingDown) && r.Context().Err() == nil {
			w.Header().Set("Connection", "close")
			w.WriteHeader(http.StatusNoContent)
		}
	})
}

func isLongPoll(ctx context.Context) bool {
	v, _ := ctx.Value(longPollKey{}).(bool)
	return v
}

// deep returns f(), made aside (see package aside) on a long poll's route:
// reading the stores or decoding JSON grows a goroutine's stack past what
// the poll needs while it waits.
func deep[T any](r *http.Request, f func() (T, error)) (T, error) {
	if !isLongPoll(r.Context()) {
		return f()
	}
	return aside.Do(f)
}

// withWait bounds r's work by its wait plus Config.RequestTimeout.
func (a *api) withWait(r *http.Request, wait time.Duration) (*http.Request, context.CancelFunc) {
	ctx, cancel := context.WithTimeoutCause(r.Context(), wait+a.timeout, errRequestTimeout)
	return r.WithContext(ctx), cancel
}

// admin lets only the admin token, or a context made by WithAdminSession
// with a session of it, through to h.
func (a *api) admin(h handlerFunc) http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		if s, ok := r.Context().Value(adminSessionKey{}).(adminSession); ok {
			if a.adminSessionValid(s) {
				return h(w, r)
			}
			return errorf(http.StatusUnauthorized, codeUnauthorized, "the admin token has changed since this session began; sign in again")
		}
		token, err := a.bearer(r)
		if err != nil {
			return err
		}
		if a.isAdmin(token) {
			return h(w, r)
		}
		if _, err := a.editorByBearer(r, token); err != nil {
			return err
		}
		return errorf(http.StatusForbidden, codeForbidden, "this route needs the admin token")
	})
}

// errEditorDisabled refuses a disabled editor: its token is known, but it may
// not act (403, not 401: another token would not help).
var errEditorDisabled = errorf(http.StatusForbidden, codeEditorDisabled, "this editor is disabled")

// EditorSession is what an editor's page session keeps to call the editor
// routes: the hash of the token it signed in with (tasks.HashToken), never the
// token, and the editor's session epoch its sign-in read
// (tasks.Editor.SessionEpoch).
type EditorSession struct {
	TokenHash [32]byte
	Epoch     int64
}

// sessionKey carries the EditorSession of a signed-in page's call.
type sessionKey struct{}

// signInKey carries the *EditorSession a sign-in fills (WithSignIn).
type signInKey struct{}

// WithEditorSession returns a copy of ctx that authenticates a request to the
// editor routes (GET /v1/me, /v1/assignments/...) as the editor of the
// session s, in place of an Authorization header: the way the web pages'
// sessions call the API in-process. A request can only get it from Go code in
// the same process; over HTTP it takes a bearer token as before.
//
// An editor given a new token, or disabled, is refused as with the old
// token; a session whose Epoch its editor has passed (it began before a
// disable, even one its sign-in raced) is answered 401 Unauthorized, whether
// the editor is enabled again or not: the session has ended for good.
func WithEditorSession(ctx context.Context, s EditorSession) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

// WithSignIn returns a copy of ctx with which an editor route that lets an
// editor through, by its bearer token, fills *s with the session to keep for
// it: the token's hash and the epoch of the very read of the editor that
// found it enabled. The pages' sign-in asks GET /v1/me so; a session begun
// from it is refused from the editor's next disable on, even when that disable
// commits before the session is stored.
func WithSignIn(ctx context.Context, s *EditorSession) context.Context {
	return context.WithValue(ctx, signInKey{}, s)
}

// errSessionEnded refuses a page session begun before its editor's latest
// disable.
var errSessionEnded = errorf(http.StatusUnauthorized, codeUnauthorized, "your session has ended; sign in again")

// adminSessionKey carries an ops session (see WithAdminSession).
type adminSessionKey struct{}

// editor lets only enabled editors' tokens through to h, with the editor.
func (a *api) editor(h editorHandlerFunc) http.Handler {
	return a.handle(func(w http.ResponseWriter, r *http.Request) error {
		e, err := deep(r, func() (*tasks.Editor, error) { return a.editorOf(r) })
		if err != nil {
			return err
		}
		return h(w, r, e)
	})
}

// editorOf returns the enabled editor r is from, by its page session or its
// bearer token.
func (a *api) editorOf(r *http.Request) (*tasks.Editor, error) {
	var e *tasks.Editor
	if s, ok := r.Context().Value(sessionKey{}).(EditorSession); ok {
		var err error
		if e, err = a.editorByHash(r, s.TokenHash); err != nil {
			return nil, err
		}
		// Before the disabled check: a session of a disabled editor has
		// ended (401), and its page signs it out.
		if s.Epoch < e.SessionEpoch {
			return nil, errSessionEnded
		}
	} else {
		token, err := a.bearer(r)
		if err != nil {
			return nil, err
		}
		if a.isAdmin(token) {
			return nil, errorf(http.StatusForbidden, codeForbidden, "this route needs an editor's token; the admin is not an editor")
		}
		if e, err = a.editorByBearer(r, token); err != nil {
			return nil, err
		}
		if s, ok := r.Context().Value(signInKey{}).(*EditorSession); ok && !e.Disabled() {
			*s = EditorSession{TokenHash: tasks.HashToken(token), Epoch: e.SessionEpoch}
		}
	}
	if e.Disabled() {
		return nil, errEditorDisabled
	}
	return e, nil
}

// bearer returns the request's bearer token, or a 401 apiError; a client
// blocked for sending wrong tokens (see throttle) is answered 429 for a
// missing token. A token is not judged here: a right one is served whatever
// its address did (see editorByBearer).
func (a *api) bearer(r *http.Request) (string, error) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		if err := a.refuseBlocked(r); err != nil {
			return "", err
		}
		return "", errorf(http.StatusUnauthorized, codeUnauthorized, "missing bearer token")
	}
	return token, nil
}

// isAdmin compares token with the admin token in constant time: both are
// hashed first, so not even the length leaks.
func (a *api) isAdmin(token string) bool {
	h := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(h[:], a.adminHash[:]) == 1
}

// editorByToken returns the editor whose token this is, or a 401 apiError.
func (a *api) editorByToken(r *http.Request, token string) (*tasks.Editor, error) {
	if len(token) > maxTokenLen {
		return nil, errUnknownToken
	}
	return a.editorByHash(r, tasks.HashToken(token))
}

var errUnknownToken = errorf(http.StatusUnauthorized, codeUnauthorized, "unknown token")

// editorByBearer is editorByToken for a bearer token: a token that is
// nobody's counts against the client (see authFailed). From a client
// blocked for wrong tokens, a token that may be right (see mayBeRight) is
// looked up as from any other; any other token is answered 429 without a
// look-up.
func (a *api) editorByBearer(r *http.Request, token string) (*tasks.Editor, error) {
	if left := a.throttle.blockedFor(a.clientAddr(r)); left > 0 && !a.mayBeRight(r, token) {
		return nil, a.throttledAnswer(r, left)
	}
	e, err := a.editorByToken(r, token)
	if errors.Is(err, errUnknownToken) {
		return nil, a.authFailed(r, "unknown_token", errUnknownToken)
	}
	return e, err
}

// mayBeRight reports, without a MySQL read, whether token may be an
// editor's: this process remembers its editor, or Redis has the mark of its
// hash (one round trip; see throttle). A token this process remembers as
// nobody's, or a Redis that does not answer, says no.
func (a *api) mayBeRight(r *http.Request, token string) bool {
	if len(token) > maxTokenLen {
		return false
	}
	hash := tasks.HashToken(token)
	if _, ok := a.editors.get(hash); ok {
		return true
	}
	if a.editors.isUnknown(hash) {
		return false
	}
	known, err := a.throttle.isKnown(r.Context(), hash)
	if err != nil {
		a.warnLimited(r.Context(), "token from a blocked address refused; its mark could not be read", "route", routeOf(r), "remote_addr", a.clientAddr(r), "err", err)
		return false
	}
	return known
}

// tokenMade takes note of hash, the hash of a token this process just made:
// it is no longer remembered as nobody's, and it is marked as an editor's
// (see throttle); a mark that could not be written is logged.
func (a *api) tokenMade(ctx context.Context, hash [32]byte) {
	a.editors.known(hash)
	if err := a.throttle.markKnown(ctx, hash); err != nil {
		a.log.WarnContext(ctx, "new token not marked; from a blocked address it waits for the block to end", "err", err)
	}
}

// editorByHash returns the editor whose token has this hash, or a 401
// apiError.
func (a *api) editorByHash(r *http.Request, hash [32]byte) (*tasks.Editor, error) {
	if e, ok := a.editors.get(hash); ok {
		return e, nil
	}
	if a.editors.isUnknown(hash) {
		return nil, errUnknownToken
	}
	gen := a.editors.generation()
	// Bounded on its own: a long poll's request has no deadline yet.
	ctx, cancel := context.WithTimeoutCause(r.Context(), a.timeout, errRequestTimeout)
	defer cancel()
	e, err := a.store.EditorByTokenHash(ctx, hash)
	err = timedOut(ctx, err)
	if errors.Is(err, tasks.ErrNotFound) {
		a.editors.putUnknown(hash, gen)
		return nil, errUnknownToken
	}
	if err != nil {
		return nil, err
	}
	a.editors.put(hash, e, gen)
	if err := a.throttle.markKnown(ctx, hash); err != nil {
		a.warnLimited(ctx, "token not marked as an editor's", "editor_id", e.ID, "err", err)
	}
	return e, nil
}
