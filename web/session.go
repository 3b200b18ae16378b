package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// session is what a signed-in browser's cookie stands for. It is kept in
// Redis under the key prefix + "web:session:" (an editor's) or
// "web:ops-session:" (the admin's) + the SHA-256 of the cookie's value, so
// that every replica sees it, sign out revokes it at once, and the cookie
// itself carries nothing but a random id.
type session struct {
	// Kind is kindAdmin for an ops console session, empty for an editor's.
	Kind       string   `json:"kind,omitempty"`
	EditorID   int64    `json:"editor_id,omitempty"`
	EditorName string   `json:"editor_name,omitempty"`
	TokenHash  [32]byte `json:"token_hash"` // SHA-256 of the editor's or the admin's token: never the token
	CSRF       string   `json:"csrf"`
}

// kindAdmin is the Kind of an ops console session.
const kindAdmin = "admin"

// checkCSRF compares token with the session's CSRF token in constant time.
func (s *session) checkCSRF(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.CSRF)) == 1
}

// sessions stores one kind of sessions in Redis, each under its own key
// space; each expires after idle without use.
type sessions struct {
	rdb    redis.UniversalClient
	prefix string // the engine's key prefix + the kind's space: "web:session:" or "web:ops-session:"
	kind   string // Kind of the sessions kept: a session of another kind is none
	idle   time.Duration
}

// redisTimeout bounds each session read or write, so that a Redis that
// hangs makes a page or call answer 503 at once rather than hold it.
const redisTimeout = 2 * time.Second

// errNoSession is a cookie that names no live session.
var errNoSession = errors.New("no session")

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

func (s *sessions) key(id string) string {
	return s.prefix + hashID(id)
}

// create stores sess under a new id and returns the id.
func (s *sessions) create(ctx context.Context, sess *session) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	sess.CSRF = randomToken()
	sess.Kind = s.kind
	b, err := json.Marshal(sess)
	if err != nil {
		return "", err
	}
	id := randomToken()
	if err := s.rdb.Set(ctx, s.key(id), b, s.idle).Err(); err != nil {
		return "", fmt.Errorf("web: store session: %w", err)
	}
	return id, nil
}

// get returns the session of id and extends its life by the idle time.
// It returns errNoSession when there is none (expired, signed out).
func (s *sessions) get(ctx context.Context, id string) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if id == "" || len(id) > 64 {
		return nil, errNoSession
	}
	b, err := s.rdb.GetEx(ctx, s.key(id), s.idle).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("web: read session: %w", err)
	}
	var sess session
	if err := json.Unmarshal(b, &sess); err != nil || sess.Kind != s.kind {
		return nil, errNoSession
	}
	return &sess, nil
}

// delete removes the session of id.
func (s *sessions) delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if err := s.rdb.Del(ctx, s.key(id)).Err(); err != nil {
		return fmt.Errorf("web: delete session: %w", err)
	}
	return nil
}
