package web

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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
	Kind       string `json:"kind,omitempty"`
	EditorID   int64  `json:"editor_id,omitempty"`
	EditorName string `json:"editor_name,omitempty"`
	// TokenHash is the SHA-256 of an editor's token (an editor's session):
	// never the token.
	TokenHash [32]byte `json:"token_hash,omitzero"`
	// Epoch is the editor's session epoch its sign-in read (an editor's
	// session): the API refuses the session once a disable has raised the
	// editor's past it, so that a sign-in which raced a disable starts a
	// session that is dead from its first call, enabled again or not.
	Epoch int64 `json:"epoch,omitempty"`
	// MAC is an ops session's api.AdminSessionMAC of the admin token and the
	// session's id; the id is not stored, so the MAC alone opens nothing.
	MAC  [32]byte `json:"mac,omitzero"`
	CSRF string   `json:"csrf"`
	// EndsMS is when the session ends whatever its use, Unix milliseconds:
	// its start plus the lifetime.
	EndsMS int64 `json:"ends_ms"`
}

// kindAdmin is the Kind of an ops console session.
const kindAdmin = "admin"

// checkCSRF compares token with the session's CSRF token in constant time.
func (s *session) checkCSRF(token string) bool {
	return token != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.CSRF)) == 1
}

// sessions stores one kind of sessions in Redis, each under its own key
// space; each ends after idle without use, or lifetime after it began,
// whichever comes first.
type sessions struct {
	rdb    redis.UniversalClient
	prefix string // the engine's key prefix + the kind's space: "web:session:" or "web:ops-session:"
	kind   string // Kind of the sessions kept: a session of another kind is none
	// index, when set, starts the key of each editor's set of its sessions
	// (the hashes of their ids), + the editor's id: the engine's key prefix
	// + "web:editor-sessions:". Each set expires a lifetime after its last
	// sign in, so it outlives every session it names.
	index    string
	idle     time.Duration
	lifetime time.Duration
	now      func() time.Time
}

// redisTimeout bounds each session read or write, so that a Redis that
// hangs makes a page or call answer 503 at once rather than hold it.
const redisTimeout = 2 * time.Second

// errNoSession is a cookie that names no live session.
var errNoSession = errors.New("no session")

var (
	//go:embed session_get.lua
	sessionGetLua    string
	sessionGetScript = redis.NewScript(sessionGetLua)
)

// randomToken returns 32 random bytes, base64url-encoded.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// editorSessions returns the editors' sessions of the engine's keyPrefix,
// with no idle time or lifetime set.
func editorSessions(rdb redis.UniversalClient, keyPrefix string) *sessions {
	return &sessions{rdb: rdb, prefix: keyPrefix + "web:session:", index: keyPrefix + "web:editor-sessions:", now: time.Now}
}

// EditorSessions ends editors' workspace sessions: the API's
// api.Config.Sessions, made before the API's handler, which New needs.
type EditorSessions struct {
	s *sessions
}

// NewEditorSessions returns the workspace sessions kept in rdb under
// keyPrefix (Config.KeyPrefix).
func NewEditorSessions(rdb redis.UniversalClient, keyPrefix string) *EditorSessions {
	return &EditorSessions{s: editorSessions(rdb, keyPrefix)}
}

// EndEditorSessions ends every workspace session of the editor, in two round
// trips; the browsers show the sign-in page at their next request.
func (e *EditorSessions) EndEditorSessions(ctx context.Context, editorID int64) error {
	_, err := e.s.endEditor(ctx, editorID)
	return err
}

func (s *sessions) key(id string) string {
	return s.prefix + hashID(id)
}

func (s *sessions) indexKey(editorID int64) string {
	return s.index + strconv.FormatInt(editorID, 10)
}

// create stores sess under id (a randomToken) in one round trip; an
// editor's session is added to the editor's set.
func (s *sessions) create(ctx context.Context, id string, sess *session) error {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	sess.CSRF = randomToken()
	sess.Kind = s.kind
	sess.EndsMS = s.now().Add(s.lifetime).UnixMilli()
	b, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.key(id), b, min(s.idle, s.lifetime))
		if s.index != "" && sess.EditorID != 0 {
			p.SAdd(ctx, s.indexKey(sess.EditorID), hashID(id))
			p.PExpire(ctx, s.indexKey(sess.EditorID), s.lifetime)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("web: store session: %w", err)
	}
	return nil
}

// get returns the session of id and extends its life by the idle time, up
// to its end, in one round trip. It returns errNoSession when there is none
// (expired, ended, signed out).
func (s *sessions) get(ctx context.Context, id string) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	if id == "" || len(id) > 64 {
		return nil, errNoSession
	}
	b, err := sessionGetScript.Run(ctx, s.rdb, []string{s.key(id)}, s.idle.Milliseconds(), s.now().UnixMilli()).Text()
	if errors.Is(err, redis.Nil) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("web: read session: %w", err)
	}
	var sess session
	if err := json.Unmarshal([]byte(b), &sess); err != nil || sess.Kind != s.kind {
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

// endEditor deletes every session of the editor that its set names, in two
// round trips, and returns how many the set named (some may have ended
// before). A session begun meanwhile is kept, and stays in the set.
func (s *sessions) endEditor(ctx context.Context, editorID int64) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	idx := s.indexKey(editorID)
	hashes, err := s.rdb.SMembers(ctx, idx).Result()
	if err != nil {
		return 0, fmt.Errorf("web: end the sessions of editor %d: %w", editorID, err)
	}
	if len(hashes) == 0 {
		return 0, nil
	}
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		members := make([]any, len(hashes))
		for i, h := range hashes {
			p.Del(ctx, s.prefix+h) // one key a command: in a Cluster each is in its own slot
			members[i] = h
		}
		p.SRem(ctx, idx, members...)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("web: end the sessions of editor %d: %w", editorID, err)
	}
	return len(hashes), nil
}
