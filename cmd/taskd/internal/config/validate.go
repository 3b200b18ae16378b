package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/taskd/taskd/tasks"
)

// Limits checked by Validate.
const (
	// LeaseTTLMin is the shortest lease: a heartbeat every third of it must
	// have time to reach the store.
	LeaseTTLMin = time.Second
	// AdminTokenMinLen is the shortest admin token accepted.
	AdminTokenMinLen = 16
	// KeyPrefixMaxLen bounds redis.key_prefix.
	KeyPrefixMaxLen = 64
	// WorkerConcurrencyMax bounds worker.concurrency.
	WorkerConcurrencyMax = 1024
	// MaxWaitMax bounds http.max_wait.
	MaxWaitMax = 15 * time.Minute
)

// Validate checks every key and returns the problems found as *KeyError values,
// joined; nil means the configuration is usable. Load calls it.
func (c *Config) Validate() error {
	v := &validator{c: c}
	v.http()
	v.mysql()
	v.dispatch()
	v.redis()
	v.sweep()
	v.worker()
	v.misc()
	return errors.Join(v.errs...)
}

type validator struct {
	c    *Config
	errs []error
}

func (v *validator) fail(key, format string, args ...any) {
	v.errs = append(v.errs, &KeyError{Key: key, Source: v.c.sources[key], Msg: fmt.Sprintf(format, args...)})
}

// atLeast checks a duration's lower bound.
func (v *validator) atLeast(key string, d, lower time.Duration) bool {
	if d < lower {
		v.fail(key, "must be at least %v, got %q", lower, d.String())
		return false
	}
	return true
}

// between checks an integer's bounds.
func (v *validator) between(key string, n, lower, upper int) {
	if n < lower || n > upper {
		v.fail(key, "must be %d..%d, got %d", lower, upper, n)
	}
}

func (v *validator) http() {
	h := v.c.HTTP
	if err := checkHostPort(h.Addr, true); err != nil {
		v.fail("http.addr", "%v", err)
	}
	v.atLeast("http.read_header_timeout", h.ReadHeaderTimeout, 100*time.Millisecond)
	v.atLeast("http.read_timeout", h.ReadTimeout, 100*time.Millisecond)
	v.atLeast("http.idle_timeout", h.IdleTimeout, 100*time.Millisecond)
	v.atLeast("http.shutdown_timeout", h.ShutdownTimeout, 0)
	v.atLeast("http.editor_cache_ttl", h.EditorCacheTTL, 0)
	if v.atLeast("http.max_wait", h.MaxWait, 100*time.Millisecond) && h.MaxWait > MaxWaitMax {
		v.fail("http.max_wait", "must be at most %v, got %q", MaxWaitMax, h.MaxWait.String())
	}
	v.atLeast("http.request_timeout", h.RequestTimeout, 100*time.Millisecond)
	// A response to a long poll is written when the wait ends, or when the
	// request's time runs out a request timeout later; the write timeout counts
	// from the end of the request's headers.
	if h.WriteTimeout <= h.MaxWait+h.RequestTimeout {
		v.fail("http.write_timeout", "must be greater than http.max_wait + http.request_timeout (%v), got %q",
			h.MaxWait+h.RequestTimeout, h.WriteTimeout.String())
	}
}

func (v *validator) mysql() {
	dsn := v.c.MySQL.DSN
	if strings.TrimSpace(dsn) == "" {
		v.fail("mysql.dsn", "must be set, e.g. user:password@tcp(127.0.0.1:3306)/taskd")
		return
	}
	if _, err := mysql.ParseDSN(dsn); err != nil {
		v.fail("mysql.dsn", "not a valid DSN: %v", err)
	}
}

func (v *validator) redis() {
	r := v.c.Redis
	switch {
	case len(r.Addrs) == 0:
		v.fail("redis.addrs", "must list at least one host:port")
	case r.Mode() == RedisRedlock && (len(r.Addrs) < 3 || len(r.Addrs)%2 == 0):
		v.fail("redis.addrs", "Redlock needs an odd number of independent masters, three or more, got %d (set redis.cluster for a Cluster)", len(r.Addrs))
	}
	seen := map[string]bool{}
	for _, a := range r.Addrs {
		if err := checkHostPort(a, false); err != nil {
			v.fail("redis.addrs", "%q: %v", a, err)
		} else if seen[a] {
			v.fail("redis.addrs", "%q is listed twice", a)
		}
		seen[a] = true
	}
	if r.DB < 0 {
		v.fail("redis.db", "must not be negative, got %d", r.DB)
	} else if r.Cluster && r.DB != 0 {
		v.fail("redis.db", "must be 0 with redis.cluster, got %d", r.DB)
	}
	switch p := r.KeyPrefix; {
	case p == "" || utf8.RuneCountInString(p) > KeyPrefixMaxLen || !utf8.ValidString(p):
		v.fail("redis.key_prefix", "must be 1..%d characters, got %q", KeyPrefixMaxLen, p)
	case strings.ContainsAny(p, "{}*?[]\\") || strings.IndexFunc(p, unicode.IsSpace) >= 0:
		// Braces would change the hash slot on a Cluster; glob characters would
		// break the sweeper's scan for orphaned locks.
		v.fail("redis.key_prefix", "must not contain spaces, braces or glob characters, got %q", p)
	}
	if v.atLeast("redis.node_timeout", r.NodeTimeout, time.Millisecond) && v.c.Dispatch.LeaseTTL >= LeaseTTLMin &&
		r.NodeTimeout > v.c.Dispatch.LeaseTTL/3 {
		v.fail("redis.node_timeout", "must be at most a third of dispatch.lease_ttl (%v), got %q", v.c.Dispatch.LeaseTTL/3, r.NodeTimeout.String())
	}
	v.atLeast("redis.dial_timeout", r.DialTimeout, time.Millisecond)
	v.atLeast("redis.read_timeout", r.ReadTimeout, time.Millisecond)
	v.atLeast("redis.write_timeout", r.WriteTimeout, time.Millisecond)
}

func (v *validator) dispatch() {
	d := v.c.Dispatch
	v.atLeast("dispatch.lease_ttl", d.LeaseTTL, LeaseTTLMin)
	if d.MaxHold < d.LeaseTTL {
		v.fail("dispatch.max_hold", "must be at least dispatch.lease_ttl (%v), got %q", d.LeaseTTL, d.MaxHold.String())
	}
	v.atLeast("dispatch.skip_for", d.SkipFor, time.Second)
	v.between("dispatch.batch", d.Batch, 1, tasks.CandidatesLimitMax)
	v.atLeast("dispatch.poll_interval", d.PollInterval, 100*time.Millisecond)
}

func (v *validator) sweep() {
	s := v.c.Sweep
	v.atLeast("sweep.interval", s.Interval, 100*time.Millisecond)
	v.between("sweep.batch", s.Batch, 1, min(tasks.RecycleLimitMax, tasks.LiveLeasesLimitMax))
	v.between("sweep.workers", s.Workers, 1, 16)
}

func (v *validator) worker() {
	w := v.c.Worker
	v.between("worker.concurrency", w.Concurrency, 1, WorkerConcurrencyMax)
	v.atLeast("worker.shutdown_timeout", w.ShutdownTimeout, 0)
	if w.MetricsAddr != "" {
		if err := checkHostPort(w.MetricsAddr, true); err != nil {
			v.fail("worker.metrics_addr", "%v", err)
		}
	}
	if len(w.Categories) > tasks.MaxCategories {
		v.fail("worker.categories", "at most %d categories, got %d", tasks.MaxCategories, len(w.Categories))
	}
	for i, cat := range w.Categories {
		if n := utf8.RuneCountInString(cat); n < 1 || n > tasks.MaxCategoryLen || !utf8.ValidString(cat) {
			v.fail("worker.categories", "%q: must be 1..%d characters", cat, tasks.MaxCategoryLen)
		} else if slices.Contains(w.Categories[:i], cat) {
			v.fail("worker.categories", "%q is listed twice", cat)
		}
	}
}

func (v *validator) misc() {
	if t := v.c.AdminToken; t != "" {
		if n := utf8.RuneCountInString(t); n < AdminTokenMinLen || !utf8.ValidString(t) {
			v.fail("admin_token", "must be at least %d characters, got %d", AdminTokenMinLen, n)
		} else if strings.IndexFunc(t, unicode.IsSpace) >= 0 {
			v.fail("admin_token", "must not contain spaces")
		}
	}

	switch l := v.c.Log.Level; strings.ToLower(l) {
	case "debug", "info", "warn", "error":
	default:
		v.fail("log.level", "must be debug, info, warn or error, got %q", l)
	}
	switch f := v.c.Log.Format; f {
	case "text", "json":
	default:
		v.fail("log.format", "must be text or json, got %q", f)
	}

	t := v.c.Telemetry
	switch t.Traces {
	case TracesNone, TracesStdout:
	case TracesOTLPGRPC, TracesOTLPHTTP:
		if t.Endpoint != "" {
			if err := checkEndpoint(t.Endpoint); err != nil {
				v.fail("telemetry.endpoint", "%v", err)
			}
		}
	default:
		v.fail("telemetry.traces", "must be none, stdout, otlp-grpc or otlp-http, got %q", t.Traces)
	}
	if strings.TrimSpace(t.ServiceName) == "" || !utf8.ValidString(t.ServiceName) {
		v.fail("telemetry.service_name", "must be set")
	}
	if !(t.SampleRatio >= 0 && t.SampleRatio <= 1) {
		v.fail("telemetry.sample_ratio", "must be 0..1, got %v", t.SampleRatio)
	}
}

// checkHostPort checks a host:port address. The host may be empty (all
// interfaces) only when emptyHost is set; the port must be a number.
func checkHostPort(addr string, emptyHost bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", addr)
	}
	if host == "" && !emptyHost {
		return fmt.Errorf("must name a host, got %q", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port must be a number 0..65535, got %q", port)
	}
	return nil
}

// checkEndpoint accepts host:port or an http(s) URL with a host.
func checkEndpoint(e string) error {
	if strings.Contains(e, "://") {
		u, err := url.Parse(e)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("must be host:port or an http(s) URL, got %q", e)
		}
		return nil
	}
	return checkHostPort(e, false)
}
