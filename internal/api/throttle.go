package api

import (
	"context"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

//go:embed authfail.lua
var authFailLua string

var authFailScript = redis.NewScript(authFailLua)

//go:embed tokenknown.lua
var tokenKnownLua string

var tokenKnownScript = redis.NewScript(tokenKnownLua)

//go:embed tokenmark.lua
var tokenMarkLua string

var tokenMarkScript = redis.NewScript(tokenMarkLua)

// Throttling of failed authentications.
const (
	// AuthFailuresDefault is how many failed tokens one client address may
	// send per Config.AuthFailureWindow when Config.AuthFailures is zero.
	AuthFailuresDefault = 20
	// AuthFailureWindowDefault is Config.AuthFailureWindow when zero.
	AuthFailureWindowDefault = time.Minute
	// blockedMax bounds the client addresses a process remembers as blocked;
	// past it, a blocked client's failures are still refused, by the counter
	// in Redis, at a round trip each.
	blockedMax = 100_000
	// knownTokenTTL is how long a token hash stays marked as an editor's
	// after a process last read it from the store or made it: a right
	// token from a blocked address is served when its mark is there.
	knownTokenTTL = 30 * 24 * time.Hour
	// failureLogsPerSecond bounds the failure log lines a process writes per
	// second; the rest are counted in one line when the next second begins.
	failureLogsPerSecond = 20
)

// instrumentationName names the API's meter.
const instrumentationName = "github.com/taskd/taskd/internal/api"

// throttle counts failed authentications (a bearer token that is nobody's)
// per client address in Redis, shared by every replica: a fixed window of
// Config.AuthFailureWindow, whose counter the first failure starts. A client
// over Config.AuthFailures in a window is blocked until the window ends: the
// failure that crossed the line, and every later wrong token on any replica,
// is answered 429 with Retry-After instead of 401.
//
// The throttle protects the store, not the tokens (an editor's token has 256
// random bits: it is not guessed). So a right token is served whatever its
// address did, and a wrong token from a blocked address is refused without a
// MySQL read. Telling the two apart without MySQL takes a memory of the right
// ones: every token hash the store answered with an editor, or that a
// process made (the API's routes, Handler.TokenMade), is marked in Redis for
// knownTokenTTL (refreshed with each read of the store). From a blocked
// address, a token is let on to the look-up when this process remembers its
// editor or Redis has its mark, and refused 429 otherwise, at one Redis round
// trip and no MySQL read. A right token no process has read or made for
// knownTokenTTL (or written into the database by another program, and never
// used since) has no mark: from a blocked address it waits for the window's
// end, as a wrong one does. A Redis that does not answer the mark leaves a
// blocked address refused.
//
// Only failures and marks reach Redis. The answer of the counter tells the
// process how long the client is blocked; the process keeps that. A replica
// that has not seen the client fail since learns of the block with the
// client's first failure there.
type throttle struct {
	rdb    redis.Scripter
	prefix string // of the counters' keys
	marks  string // prefix of the marks of known token hashes
	limit  int64
	window time.Duration
	clock  func() time.Time
	log    *slog.Logger

	failures  metric.Int64Counter // failed tokens, by route and reason
	throttled metric.Int64Counter // 429 answers, by route

	mu      sync.RWMutex
	blocked map[string]time.Time // client address: blocked until
	logs    logLimiter
}

func newThrottle(cfg Config) (*throttle, error) {
	m := cfg.MeterProvider.Meter(instrumentationName)
	failures, err1 := m.Int64Counter("taskd.auth.failures", metric.WithUnit("{count}"),
		metric.WithDescription("Wrong tokens: bearer tokens that were nobody's, at the API and at the pages' sign-ins, and wrong metrics tokens, by route and reason."))
	throttled, err2 := m.Int64Counter("taskd.auth.throttled", metric.WithUnit("{count}"),
		metric.WithDescription("Wrong tokens (and requests without one) answered 429 because their client address sent too many wrong tokens, by route."))
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("metric instruments: %w", err)
	}
	if cfg.Redis == nil || cfg.AuthFailures < 0 {
		return &throttle{failures: failures, throttled: throttled, log: cfg.Logger, clock: time.Now}, nil
	}
	return &throttle{
		rdb: cfg.Redis, prefix: cfg.KeyPrefix + "auth:fail:", marks: cfg.KeyPrefix + "auth:known:", limit: int64(cfg.AuthFailures), window: cfg.AuthFailureWindow,
		clock: time.Now, log: cfg.Logger, failures: failures, throttled: throttled,
		blocked: make(map[string]time.Time),
	}, nil
}

// on reports whether failures are counted and clients blocked.
func (t *throttle) on() bool { return t.rdb != nil }

// blockedFor returns how much longer client is blocked, as this process
// knows, or 0. It reads no store.
func (t *throttle) blockedFor(client string) time.Duration {
	if !t.on() {
		return 0
	}
	t.mu.RLock()
	until, ok := t.blocked[client]
	t.mu.RUnlock()
	if !ok {
		return 0
	}
	left := until.Sub(t.clock())
	if left <= 0 {
		t.mu.Lock()
		if t.blocked[client].Equal(until) {
			delete(t.blocked, client)
		}
		t.mu.Unlock()
		return 0
	}
	return left
}

// fail counts a failure of client in Redis (one round trip) and returns
// how long the client is blocked from now on, or 0 when it is still under
// the limit.
func (t *throttle) fail(ctx context.Context, client string) (time.Duration, error) {
	if !t.on() {
		return 0, nil
	}
	res, err := authFailScript.Run(ctx, t.rdb, []string{t.prefix + client}, t.window.Milliseconds()).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("count failed authentication: %w", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("count failed authentication: unexpected answer %v", res)
	}
	if res[0] <= t.limit {
		return 0, nil
	}
	left := time.Duration(res[1]) * time.Millisecond
	if left <= 0 {
		left = t.window
	}
	t.block(client, t.clock().Add(left))
	return left, nil
}

// isKnown reports whether Redis has the mark of a token hash that an editor
// had (one round trip).
func (t *throttle) isKnown(ctx context.Context, hash [32]byte) (bool, error) {
	n, err := tokenKnownScript.Run(ctx, t.rdb, []string{t.marks + hex.EncodeToString(hash[:])}).Int64()
	if err != nil {
		return false, fmt.Errorf("read the mark of a token: %w", err)
	}
	return n == 1, nil
}

// markKnown marks hash, an editor's token hash, for knownTokenTTL (one
// round trip). Without throttling it does nothing.
func (t *throttle) markKnown(ctx context.Context, hash [32]byte) error {
	if !t.on() {
		return nil
	}
	err := tokenMarkScript.Run(ctx, t.rdb, []string{t.marks + hex.EncodeToString(hash[:])}, knownTokenTTL.Milliseconds()).Err()
	if err != nil {
		return fmt.Errorf("mark a token as an editor's: %w", err)
	}
	return nil
}

// TokenMade takes note of hash, the hash of an editor's token made outside
// the API (by the engine's own editor methods): this process no longer
// remembers it as nobody's, and it is marked as an editor's in Redis, so that
// it is served from an address blocked for wrong tokens (see the package
// documentation). A mark that could not be written is logged.
func (h *Handler) TokenMade(ctx context.Context, hash [32]byte) { h.a.tokenMade(ctx, hash) }

// block remembers that client is blocked until then.
func (t *throttle) block(client string, until time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.blocked[client]; !ok && len(t.blocked) >= blockedMax {
		now := t.clock()
		for c, u := range t.blocked {
			if !now.Before(u) {
				delete(t.blocked, c)
			}
		}
		if len(t.blocked) >= blockedMax {
			return
		}
	}
	t.blocked[client] = until
}

// throttledError is the 429 answer of a client blocked for left.
func throttledError(left time.Duration) *apiError {
	secs := int((left + time.Second - 1) / time.Second)
	e := errorf(http.StatusTooManyRequests, codeThrottled,
		"too many wrong tokens from your address; retry in %d s", secs)
	e.retryAfter = secs
	return e
}

// routeKey carries the route an in-process request stands for; see
// WithRoute.
type routeKey struct{}

// WithRoute returns a copy of ctx that names route ("POST /signin") as
// where a request made in-process with it came from, in the logs and
// metrics of a wrong token: the web pages' sign-ins ask the API whether the
// token they were given opens it. Such a request's RemoteAddr should be the
// browser's, so that its wrong tokens count against the browser's address.
func WithRoute(ctx context.Context, route string) context.Context {
	return context.WithValue(ctx, routeKey{}, route)
}

// routeOf returns the route r stands for: WithRoute's, or the API's route
// pattern.
func routeOf(r *http.Request) string {
	if route, ok := r.Context().Value(routeKey{}).(string); ok {
		return route
	}
	return r.Pattern
}

// refuseBlocked returns the 429 apiError when r's client is blocked, else
// nil. It reads no store.
func (a *api) refuseBlocked(r *http.Request) error {
	left := a.throttle.blockedFor(a.clientAddr(r))
	if left <= 0 {
		return nil
	}
	return a.throttledAnswer(r, left)
}

// throttledAnswer counts a 429 answer to r, whose client is blocked for left, and
// returns it.
func (a *api) throttledAnswer(r *http.Request, left time.Duration) error {
	a.throttle.throttled.Add(r.Context(), 1, metric.WithAttributes(attribute.String("route", routeOf(r))))
	return throttledError(left)
}

// authFailed records that r's bearer token was nobody's, for reason: it is
// logged (never the token) and counted in the metrics and against the
// client's address. It returns the answer: 401, or 429 once the client is
// over the limit. A Redis that does not answer leaves it 401.
func (a *api) authFailed(r *http.Request, reason string, answer *apiError) error {
	ctx, client, route := r.Context(), a.clientAddr(r), routeOf(r)
	a.throttle.failures.Add(ctx, 1, metric.WithAttributes(attribute.String("route", route), attribute.String("reason", reason)))
	left, err := a.throttle.fail(ctx, client)
	t := a.throttle
	if dropped, ok := t.logs.allow(t.clock()); ok {
		if dropped > 0 {
			a.log.WarnContext(ctx, "authentication failures not logged", "count", dropped)
		}
		switch {
		case err != nil:
			a.log.WarnContext(ctx, "authentication failed; not counted", "route", route, "remote_addr", client, "reason", reason, "err", err)
		case left > 0:
			a.log.WarnContext(ctx, "authentication failed; client blocked", "route", route, "remote_addr", client, "reason", reason, "blocked_for", left.Round(time.Second))
		default:
			a.log.InfoContext(ctx, "authentication failed", "route", route, "remote_addr", client, "reason", reason)
		}
	}
	if left > 0 {
		t.throttled.Add(ctx, 1, metric.WithAttributes(attribute.String("route", route)))
		return throttledError(left)
	}
	return answer
}

// warnLimited logs a warning of the throttle, within the
// failureLogsPerSecond the failures' lines share.
func (a *api) warnLimited(ctx context.Context, msg string, args ...any) {
	t := a.throttle
	dropped, ok := t.logs.allow(t.clock())
	if !ok {
		return
	}
	if dropped > 0 {
		a.log.WarnContext(ctx, "authentication failures not logged", "count", dropped)
	}
	a.log.WarnContext(ctx, msg, args...)
}

// logLimiter lets through at most failureLogsPerSecond lines a second.
type logLimiter struct {
	mu      sync.Mutex
	second  int64
	n       int
	dropped int
}

// allow reports whether a line may be written now; with the first line of
// a second, it also returns how many lines were dropped before.
func (l *logLimiter) allow(now time.Time) (dropped int, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := now.Unix(); s != l.second {
		l.second, l.n = s, 0
	}
	if l.n >= failureLogsPerSecond {
		l.dropped++
		return 0, false
	}
	l.n++
	dropped, l.dropped = l.dropped, 0
	return dropped, true
}
