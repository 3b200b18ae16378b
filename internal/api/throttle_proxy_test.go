package api_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/testenv"
	"github.com/taskd/taskd/tasks"
)

// doVia sends a GET with a bearer token (none when "") and the header
// name: value (none when name is ""), as a proxy in front of the instance
// would.
func (in *instance) doVia(t *testing.T, path, token, name, value string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "GET", in.url+path, http.NoBody)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if name != "" {
		req.Header.Set(name, value)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	in.checkSpec(req, nil, res, data)
	return response{status: res.StatusCode, header: res.Header, body: data}
}

// loopback is the test server's peer: a trusted proxy when listed.
var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}

// TestSprayerLocksNoEditorOut: behind a proxy, 500 wrong tokens from the
// editors' address block the address's wrong tokens, without a store call
// past the limit, and leave the editors' right tokens served; other
// addresses behind the same proxy are not blocked.
func TestSprayerLocksNoEditorOut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	in := newInstance(t, b, testenv.Prefix(t), api.Config{TrustedProxies: loopback})
	ed := in.editor(t, "sprayed", "news")
	const office, xff = "203.0.113.9", "X-Forwarded-For"

	statuses := map[int]int{}
	var callsAtLimit int64
	for i := range 500 {
		res := in.doVia(t, "/v1/me", "hostile-wrong-token-"+strconv.Itoa(i), xff, "198.51.100.77, "+office)
		statuses[res.status]++
		if i == api.AuthFailuresDefault {
			callsAtLimit = in.store.calls.Load()
		}
	}
	calls := in.store.calls.Load()
	t.Logf("500 wrong tokens from %s: %v; store calls %d, %d of them after the limit", office, statuses, calls, calls-callsAtLimit)
	if statuses[http.StatusUnauthorized] != api.AuthFailuresDefault || statuses[http.StatusTooManyRequests] != 500-api.AuthFailuresDefault {
		t.Errorf("answers to 500 wrong tokens: %v, want %d 401 and the rest 429", statuses, api.AuthFailuresDefault)
	}
	if calls != callsAtLimit {
		t.Errorf("%d wrong tokens past the limit cost %d store calls, want 0", 500-api.AuthFailuresDefault-1, calls-callsAtLimit)
	}

	// The editor at the same address is served; the sprayer still is not,
	// and costs no store call.
	start := time.Now()
	wantJSON(t, in.doVia(t, "/v1/me", ed.Token, xff, office), http.StatusOK, nil)
	t.Logf("the editor's right token from %s right after: 200 in %v", office, time.Since(start).Round(time.Millisecond))
	calls = in.store.calls.Load()
	wantThrottled(t, in.doVia(t, "/v1/me", "hostile-wrong-token-x", xff, office), time.Minute)
	if n := in.store.calls.Load(); n != calls {
		t.Errorf("a wrong token from the blocked address cost %d store calls", n-calls)
	}
	// Another client behind the same proxy is not blocked.
	wantError(t, in.doVia(t, "/v1/me", "another-wrong-token", xff, "203.0.113.10"), http.StatusUnauthorized, "unauthorized")

	// A right token that no process has read or made (an editor made in
	// the database by another program) has no mark: from the blocked address
	// it waits, at no store call, like a wrong one; once used from an address
	// that is not blocked it is marked and served there too.
	token, hash := tasks.NewToken()
	b.secret(token)
	if _, err := b.store.CreateEditor(context.Background(), tasks.CreateEditorParams{Name: "unmarked", Categories: []string{"news"}, TokenHash: hash}); err != nil {
		t.Fatal(err)
	}
	calls = in.store.calls.Load()
	wantThrottled(t, in.doVia(t, "/v1/me", token, xff, office), time.Minute)
	if n := in.store.calls.Load(); n != calls {
		t.Errorf("an unmarked token from the blocked address cost %d store calls", n-calls)
	}
	wantJSON(t, in.doVia(t, "/v1/me", token, xff, "203.0.113.11"), http.StatusOK, nil)
	wantJSON(t, in.doVia(t, "/v1/me", token, xff, office), http.StatusOK, nil)
}

// TestForwardedOnlyFromTrustedProxies: X-Forwarded-For and Forwarded name
// the client only when the connection is a trusted proxy's, by the
// right-most hop that is no trusted proxy; an IPv6 client counts with its
// /64.
func TestForwardedOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	cfg := api.Config{AuthFailures: 1, TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}
	untrusted := newInstance(t, b, testenv.Prefix(t), cfg)
	// The peer (127.0.0.1) is no trusted proxy: whatever the headers say,
	// the failures are its.
	wantError(t, untrusted.doVia(t, "/v1/me", "wrong-a", "X-Forwarded-For", "198.51.100.1"), http.StatusUnauthorized, "unauthorized")
	wantThrottled(t, untrusted.doVia(t, "/v1/me", "wrong-b", "X-Forwarded-For", "198.51.100.2"), time.Minute)
	wantThrottled(t, untrusted.doVia(t, "/v1/me", "wrong-c", "Forwarded", "for=198.51.100.3"), time.Minute)
	if keys, err := b.rdb.Keys(ctx, untrusted.prefix+"auth:fail:*").Result(); err != nil || len(keys) != 1 || keys[0] != untrusted.prefix+"auth:fail:127.0.0.1" {
		t.Errorf("counters from an untrusted peer: %v, %v; want 127.0.0.1's only", keys, err)
	}

	cfg.TrustedProxies = append(cfg.TrustedProxies, loopback...)
	proxied := newInstance(t, b, testenv.Prefix(t), cfg)
	for _, c := range []struct {
		name, value string
		client      string // whose counter the first wrong token starts
	}{
		// The hops left of the right-most untrusted one are the client's
		// to write, and ignored.
		{"X-Forwarded-For", "192.0.2.1, 198.51.100.4, 10.1.2.3", "198.51.100.4"},
		{"Forwarded", `for=192.0.2.1, for="198.51.100.5:4711";proto=https, for=10.0.0.1`, "198.51.100.5"},
		{"Forwarded", `for="[2001:db8:1:2::a]:4711"`, "2001:db8:1:2::/64"},
		// Every hop a trusted proxy: the left-most.
		{"X-Forwarded-For", "10.9.9.9, 10.1.1.1", "10.9.9.9"},
		// A hop that names no address: the trusted proxy that wrote it.
		{"X-Forwarded-For", "198.51.100.6, unknown, 10.2.2.2", "10.2.2.2"},
	} {
		wantError(t, proxied.doVia(t, "/v1/me", "wrong-token", c.name, c.value), http.StatusUnauthorized, "unauthorized")
		if n, err := b.rdb.Exists(ctx, proxied.prefix+"auth:fail:"+c.client).Result(); err != nil || n != 1 {
			t.Errorf("%s: %s: no counter for %s (%d, %v)", c.name, c.value, c.client, n, err)
		}
	}
	// The /64 is one client: another address in it is blocked now, one in
	// the next /64 is not.
	wantThrottled(t, proxied.doVia(t, "/v1/me", "wrong-token", "X-Forwarded-For", "2001:db8:1:2:ffff::1"), time.Minute)
	wantError(t, proxied.doVia(t, "/v1/me", "wrong-token", "X-Forwarded-For", "2001:db8:1:3::1"), http.StatusUnauthorized, "unauthorized")
	// Both headers: neither is believed, the proxy's address counts.
	wantError(t, proxied.doVia(t, "/v1/me", "wrong-token", "X-Forwarded-For", "198.51.100.4"), http.StatusTooManyRequests, "throttled")
	req, _ := http.NewRequestWithContext(ctx, "GET", proxied.url+"/v1/me", http.NoBody)
	req.Header.Set("Authorization", "Bearer wrong-token")
	req.Header.Set("X-Forwarded-For", "198.51.100.8")
	req.Header.Set("Forwarded", "for=198.51.100.9")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if n, err := b.rdb.Exists(ctx, proxied.prefix+"auth:fail:127.0.0.1").Result(); err != nil || n != 1 || res.StatusCode != http.StatusUnauthorized {
		t.Errorf("both headers: %d, counter of the proxy %d, %v; want 401 and the proxy's counter", res.StatusCode, n, err)
	}
}

// TestWrongMetricsTokensAreCounted: wrong tokens at GET /metrics count
// against the address with the others and are throttled; the right one is
// served whatever the address did.
func TestWrongMetricsTokensAreCounted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const metricsToken = "metrics-token-0123456789"
	b.secret(metricsToken)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "taskd_up 1\n") })
	in := newInstance(t, b, testenv.Prefix(t), api.Config{AuthFailures: 2, Metrics: metrics, MetricsToken: metricsToken})
	for i := range 2 {
		res := in.doVia(t, "/metrics", "wrong-metrics-token-"+strconv.Itoa(i), "", "")
		wantError(t, res, http.StatusUnauthorized, "unauthorized")
		if got := res.header.Get("WWW-Authenticate"); got != `Bearer realm="taskd metrics"` {
			t.Errorf("WWW-Authenticate = %q", got)
		}
	}
	// A missing token is not counted.
	wantError(t, in.doVia(t, "/metrics", "", "", ""), http.StatusUnauthorized, "unauthorized")
	wantThrottled(t, in.doVia(t, "/metrics", "wrong-metrics-token-2", "", ""), time.Minute)
	wantThrottled(t, in.doVia(t, "/metrics", "wrong-metrics-token-3", "", ""), time.Minute)
	wantThrottled(t, in.doVia(t, "/metrics", "", "", ""), time.Minute)
	// One counter for the address: its wrong bearer tokens are refused too.
	wantThrottled(t, in.doVia(t, "/v1/me", "wrong-editor-token", "", ""), time.Minute)
	if res := in.doVia(t, "/metrics", metricsToken, "", ""); res.status != http.StatusOK || string(res.body) != "taskd_up 1\n" {
		t.Errorf("GET /metrics with its token from a blocked address: %d %s", res.status, res.body)
	}
	if n := in.counter(t, "taskd.auth.failures", "route=GET /metrics", "reason=wrong_metrics_token"); n != 3 {
		t.Errorf("taskd.auth.failures{route=GET /metrics} = %d, want 3", n)
	}
}

// failingScripter passes scripts on to the real Redis until failing is set,
// then fails them, as a Redis that went away does.
type failingScripter struct {
	redis.Scripter
	failing atomic.Bool
}

var errRedisGone = errors.New("redis went away")

func (f *failingScripter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	if f.failing.Load() {
		return redis.NewCmdResult(nil, errRedisGone)
	}
	return f.Scripter.EvalSha(ctx, sha1, keys, args...)
}

func (f *failingScripter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	if f.failing.Load() {
		return redis.NewCmdResult(nil, errRedisGone)
	}
	return f.Scripter.Eval(ctx, script, keys, args...)
}

// TestBlockedWithoutMarks: when the marks cannot be read, a blocked
// address's tokens that this process does not remember are refused 429,
// without a store call, and those it remembers are served.
func TestBlockedWithoutMarks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	prefix := testenv.Prefix(t)
	other := newInstance(t, b, prefix, api.Config{})
	unseen := other.editor(t, "unseen", "news")
	fs := &failingScripter{Scripter: b.rdb}
	cfg := api.Config{AuthFailures: 1, Redis: fs}
	in := newInstance(t, b, prefix, cfg)
	seen := in.editor(t, "seen", "news")
	wantJSON(t, in.do(t, "GET", "/v1/me", seen.Token, ""), http.StatusOK, nil)
	wantError(t, in.do(t, "GET", "/v1/me", "wrong-token-1", ""), http.StatusUnauthorized, "unauthorized")
	wantThrottled(t, in.do(t, "GET", "/v1/me", "wrong-token-2", ""), time.Minute)

	fs.failing.Store(true)
	calls := in.store.calls.Load()
	wantThrottled(t, in.do(t, "GET", "/v1/me", unseen.Token, ""), time.Minute)
	wantThrottled(t, in.do(t, "GET", "/v1/me", "wrong-token-3", ""), time.Minute)
	if n := in.store.calls.Load(); n != calls {
		t.Errorf("tokens from a blocked address without marks cost %d store calls", n-calls)
	}
	wantJSON(t, in.do(t, "GET", "/v1/me", seen.Token, ""), http.StatusOK, nil)
	if !strings.Contains(b.logs.String(), `msg="token from a blocked address refused; its mark could not be read"`) {
		t.Errorf("the logs do not say why a token was refused:\n%s", b.logs.String())
	}
}
