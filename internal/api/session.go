package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
)

// Sessions ends an editor's signed-in page sessions (the workspace's, kept by
// the web package), so that disabling an editor or giving it a new token
// signs it out everywhere at once, and enabling it again brings no old
// session back. The engine passes the web package's; the API does not import
// it.
type Sessions interface {
	// EndEditorSessions ends every session of the editor; it is not an
	// error that there is none.
	EndEditorSessions(ctx context.Context, editorID int64) error
}

// adminSession is what WithAdminSession puts in a context.
type adminSession struct {
	id  string
	mac [32]byte
}

// WithAdminSession returns a copy of ctx that authenticates a request to the
// admin routes as the admin, in place of an Authorization header, when mac is
// AdminSessionMAC(Config.AdminToken, sessionID): the way the ops console's
// sessions call the API in-process. The MAC is checked on every request, in
// constant time, so a session begun under an admin token that has since
// changed is refused (401). A request can only get it from Go code in the
// same process; over HTTP it takes a bearer token as before. It does not
// authenticate the editor routes: the admin is not an editor.
func WithAdminSession(ctx context.Context, sessionID string, mac [32]byte) context.Context {
	return context.WithValue(ctx, adminSessionKey{}, adminSession{id: sessionID, mac: mac})
}

// AdminSessionMAC returns what an ops console session keeps in place of the
// admin token: an HMAC-SHA256 keyed by the admin token over the session's id
// (its cookie's value). The session store holds the id only hashed, so what
// it holds opens nothing by itself: neither a copy under another key, nor a
// record made without the admin token.
func AdminSessionMAC(adminToken, sessionID string) [32]byte {
	return sessionMAC(adminSessionMACKey(adminToken), sessionID)
}

// adminSessionMACKey derives the key of the ops sessions' MACs from the admin
// token, apart from its SHA-256 (which older sessions kept).
func adminSessionMACKey(adminToken string) [32]byte {
	m := hmac.New(sha256.New, []byte(adminToken))
	_, _ = m.Write([]byte("taskd ops session"))
	return [32]byte(m.Sum(nil))
}

func sessionMAC(key [32]byte, sessionID string) [32]byte {
	m := hmac.New(sha256.New, key[:])
	_, _ = m.Write([]byte(sessionID))
	return [32]byte(m.Sum(nil))
}

// adminSessionValid reports whether s was made with this API's admin token.
func (a *api) adminSessionValid(s adminSession) bool {
	want := sessionMAC(a.opsKey, s.id)
	return hmac.Equal(want[:], s.mac[:])
}

// endSessions ends the page sessions of editor id after a change that
// revokes them; it reports whether they ended (or there is no Sessions).
func (a *api) endSessions(ctx context.Context, id int64) error {
	if a.sessions == nil {
		return nil
	}
	return a.sessions.EndEditorSessions(ctx, id)
}
