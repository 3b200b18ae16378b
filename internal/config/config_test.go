package config

import (
	"errors"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/dispatcher"
	"github.com/taskd/taskd/internal/api"
	"github.com/taskd/taskd/internal/delivery"
	"github.com/taskd/taskd/internal/store"
	"github.com/taskd/taskd/internal/sweeper"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/internal/web"
	"github.com/taskd/taskd/internal/worker"
	"github.com/taskd/taskd/locker"
	"github.com/taskd/taskd/tasks"
)

const testDSN = "taskd:taskd@tcp(127.0.0.1:3306)/taskd"

// envMap is an environment for Load.
type envMap map[string]string

func (m envMap) lookup(name string) (string, bool) {
	v, ok := m[name]
	return v, ok
}

// parse is Parse with a YAML string and an environment that sets the DSN unless
// the test sets it.
func parse(t *testing.T, yamlText string, env envMap) (*Config, error) {
	t.Helper()
	if env == nil {
		env = envMap{}
	}
	if _, ok := env["TASKD_MYSQL_DSN"]; !ok && !strings.Contains(yamlText, "dsn:") {
		env["TASKD_MYSQL_DSN"] = testDSN
	}
	return Parse([]byte(yamlText), "test.yaml", env.lookup)
}

func mustParse(t *testing.T, yamlText string, env envMap) *Config {
	t.Helper()
	cfg, err := parse(t, yamlText, env)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return cfg
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, "", nil)
	want := Default()
	want.MySQL.DSN = testDSN
	cfg.sources, want.sources = nil, nil
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("config with nothing set:\n got %+v\nwant %+v", cfg, want)
	}
	if err := Default().Validate(); err == nil || !strings.Contains(err.Error(), "mysql.dsn") {
		t.Errorf("Default().Validate() = %v, want an error about mysql.dsn (it has no default)", err)
	}
	// An empty mapping, a comment-only file and null sections keep the defaults too.
	for _, text := range []string{"{}", "# nothing\n", "http:\nredis: ~\n", "---\n"} {
		cfg := mustParse(t, text, nil)
		if cfg.HTTP.Addr != taskd.HTTPAddrDefault || cfg.Redis.KeyPrefix != Default().Redis.KeyPrefix {
			t.Errorf("%q: got http.addr %q, redis.key_prefix %q, want the defaults", text, cfg.HTTP.Addr, cfg.Redis.KeyPrefix)
		}
	}
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	yamlText := `
http:
  addr: 127.0.0.1:9000
  max_wait: 20s
dispatch:
  lease_ttl: 20s
  batch: 32
redis:
  addrs: [10.0.0.1:6379, 10.0.0.2:6379, 10.0.0.3:6379]
`
	cfg := mustParse(t, yamlText, envMap{
		"TASKD_LEASE_TTL":     "40s",             // alias beats the file
		"TASKD_HTTP_ADDR":     "127.0.0.1:9100",  // derived name beats the file
		"TASKD_REDIS_ADDRS":   " 127.0.0.1:1 , ", // comma list, trimmed, empties dropped
		"TASKD_SWEEP_BATCH":   "50",              // env only
		"TASKD_REDIS_CLUSTER": "true",
	})
	checks := []struct {
		key    string
		got    any
		want   any
		source string
	}{
		{"dispatch.lease_ttl", cfg.Dispatch.LeaseTTL, 40 * time.Second, "TASKD_LEASE_TTL"},
		{"http.addr", cfg.HTTP.Addr, "127.0.0.1:9100", "TASKD_HTTP_ADDR"},
		{"redis.addrs", cfg.Redis.Addrs, []string{"127.0.0.1:1"}, "TASKD_REDIS_ADDRS"},
		{"sweep.batch", cfg.Sweep.Batch, 50, "TASKD_SWEEP_BATCH"},
		{"redis.cluster", cfg.Redis.Cluster, true, "TASKD_REDIS_CLUSTER"},
		{"http.max_wait", cfg.HTTP.MaxWait, 20 * time.Second, "test.yaml line 4"},
		{"dispatch.batch", cfg.Dispatch.Batch, 32, "test.yaml line 7"},
		{"dispatch.max_hold", cfg.Dispatch.MaxHold, Default().Dispatch.MaxHold, ""},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %v, want %v", c.key, c.got, c.want)
		}
		if got := cfg.Source(c.key); got != c.source {
			t.Errorf("source of %s = %q, want %q", c.key, got, c.source)
		}
	}

	// The derived name and its alias agree: fine. They disagree: an error naming both.
	if _, err := parse(t, "", envMap{"TASKD_DISPATCH_LEASE_TTL": "40s", "TASKD_LEASE_TTL": "40s"}); err != nil {
		t.Errorf("same value under both names: %v", err)
	}
	_, err := parse(t, "", envMap{"TASKD_DISPATCH_LEASE_TTL": "40s", "TASKD_LEASE_TTL": "41s"})
	wantKeyError(t, err, "dispatch.lease_ttl", "TASKD_DISPATCH_LEASE_TTL and TASKD_LEASE_TTL")

	// Set to the empty string counts as set.
	_, err = parse(t, "", envMap{"TASKD_MYSQL_DSN": ""})
	wantKeyError(t, err, "mysql.dsn", "TASKD_MYSQL_DSN")
}

// wantKeyError checks that err holds a *KeyError for key whose text contains
// every one of parts.
func wantKeyError(t *testing.T, err error, key string, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one about %s", key)
	}
	for _, e := range flatten(err) {
		var ke *KeyError
		if errors.As(e, &ke) && ke.Key == key {
			for _, p := range parts {
				if !strings.Contains(ke.Error(), p) {
					t.Errorf("error about %s = %q, want it to mention %q", key, ke.Error(), p)
				}
			}
			if !strings.HasPrefix(ke.Error(), "config: "+key+": ") {
				t.Errorf("error %q does not start with %q", ke.Error(), "config: "+key+": ")
			}
			return
		}
	}
	t.Errorf("error %q has no KeyError for %s", err, key)
}

// flatten unwraps errors.Join.
func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

func TestInvalidValues(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  string // variable to set
		val  string
		key  string
		want string // part of the message
	}{
		{"TASKD_LEASE_TTL", "5ms", "dispatch.lease_ttl", `must be at least 1s, got "5ms"`},
		{"TASKD_LEASE_TTL", "soon", "dispatch.lease_ttl", `must be a duration`},
		{"TASKD_MAX_HOLD", "10s", "dispatch.max_hold", `at least dispatch.lease_ttl`},
		{"TASKD_DISPATCH_SKIP_FOR", "1ms", "dispatch.skip_for", "at least 1s"},
		{"TASKD_DISPATCH_BATCH", "-1", "dispatch.batch", "must be 1..1000, got -1"},
		{"TASKD_DISPATCH_BATCH", "many", "dispatch.batch", "must be an integer"},
		{"TASKD_DISPATCH_POLL_INTERVAL", "1ms", "dispatch.poll_interval", "at least 100ms"},
		{"TASKD_DISPATCH_INSERT_TX_WAITERS", "257", "dispatch.insert_tx_waiters", "must be 1..256, got 257"},
		{"TASKD_SWEEP_INTERVAL", "10ms", "sweep.interval", "whole number of seconds, at least 1s"},
		{"TASKD_SWEEP_INTERVAL", "1500ms", "sweep.interval", "whole number of seconds"},
		{"TASKD_SWEEP_INTERVAL", "@every soon", "sweep.interval", "@every needs a duration"},
		{"TASKD_SWEEP_INTERVAL", "every ten seconds", "sweep.interval", `schedule "every ten seconds": want a duration, @every, a descriptor or a cron expression`},
		{"TASKD_SWEEP_INTERVAL", "* * * * * * *", "sweep.interval", "cron expression"},
		{"TASKD_SWEEP_INTERVAL", "0 0 0 30 2 *", "sweep.interval", "never runs"},
		{"TASKD_SWEEP_BATCH", "20000", "sweep.batch", "must be 1..10000"},
		{"TASKD_SWEEP_WORKERS", "17", "sweep.workers", "must be 1..16, got 17"},
		{"TASKD_RETENTION_DONE", "-1h", "retention.done", `must not be negative (0 keeps forever), got "-1h0m0s"`},
		{"TASKD_RETENTION_CANCELLED", "-1s", "retention.cancelled", "must not be negative"},
		{"TASKD_RETENTION_DEAD", "-1s", "retention.dead", "must not be negative"},
		{"TASKD_RETENTION_WEBHOOKS", "-1s", "retention.webhooks", "must not be negative"},
		{"TASKD_RETENTION_DONE", "a day", "retention.done", "must be a duration"},
		{"TASKD_RETENTION_BATCH", "10001", "retention.batch", "must be 1..10000, got 10001"},
		{"TASKD_HTTP_ADDR", "localhost", "http.addr", "must be host:port"},
		{"TASKD_HTTP_ADDR", "127.0.0.1:http", "http.addr", "port must be a number"},
		{"TASKD_HTTP_MAX_WAIT", "2m", "http.write_timeout", "greater than http.max_wait"},
		{"TASKD_HTTP_MAX_WAIT", "1h", "http.max_wait", "at most 15m"},
		{"TASKD_HTTP_MAX_WAIT", "50ms", "http.max_wait", "at least 100ms"},
		{"TASKD_HTTP_REQUEST_TIMEOUT", "50ms", "http.request_timeout", "at least 100ms"},
		{"TASKD_HTTP_REQUEST_TIMEOUT", "45s", "http.write_timeout", "greater than http.max_wait + http.request_timeout"},
		{"TASKD_HTTP_READ_HEADER_TIMEOUT", "10ms", "http.read_header_timeout", "at least 100ms"},
		{"TASKD_HTTP_SHUTDOWN_TIMEOUT", "-1s", "http.shutdown_timeout", "at least 0s"},
		{"TASKD_HTTP_TRUSTED_PROXIES", "10.0.0.0/8,10.0.0.0/33", "http.trusted_proxies", `must be CIDRs such as 10.0.0.0/8 or 2001:db8::/32, got "10.0.0.0/33"`},
		{"TASKD_HTTP_TRUSTED_PROXIES", "10.0.0.1:80", "http.trusted_proxies", `got "10.0.0.1:80"`},
		{"TASKD_HTTP_TRUSTED_PROXIES", "proxy.internal", "http.trusted_proxies", `got "proxy.internal"`},
		{"TASKD_MYSQL_DSN", "", "mysql.dsn", "must be set"},
		{"TASKD_MYSQL_DSN", "no-slash", "mysql.dsn", "not a valid DSN"},
		{"TASKD_MYSQL_REPLICA_DSN", "no-slash", "mysql.replica_dsn", "not a valid DSN"},
		{"TASKD_REDIS_ADDRS", "a:1,b:2", "redis.addrs", "odd number"},
		{"TASKD_REDIS_ADDRS", ":6379", "redis.addrs", "must name a host"},
		{"TASKD_REDIS_ADDRS", "a:1,a:1,b:2", "redis.addrs", "listed twice"},
		{"TASKD_REDIS_CLUSTER", "maybe", "redis.cluster", "true or false"},
		{"TASKD_REDIS_DB", "-1", "redis.db", "must not be negative"},
		{"TASKD_REDIS_KEY_PREFIX", strings.Repeat("k", 65), "redis.key_prefix", "1..64 characters"},
		{"TASKD_REDIS_KEY_PREFIX", "t{1}:", "redis.key_prefix", "braces"},
		{"TASKD_REDIS_NODE_TIMEOUT", "20s", "redis.node_timeout", "a third of dispatch.lease_ttl"},
		{"TASKD_REDIS_DIAL_TIMEOUT", "-1s", "redis.dial_timeout", "at least 1ms"},
		{"TASKD_WORKER_CONCURRENCY", "-1", "worker.concurrency", "must be 1..1024"},
		{"TASKD_WORKER_CATEGORIES", "a,a", "worker.categories", "listed twice"},
		{"TASKD_WORKER_BATCH_SIZE", "1001", "worker.batch_size", "must be 1..1000, got 1001"},
		{"TASKD_WORKER_BATCH_SIZE", "-1", "worker.batch_size", "must be 1..1000, got -1"},
		{"TASKD_WORKER_FLUSH_INTERVAL", "2s", "worker.flush_interval", `must be at most 1s, got "2s"`},
		{"TASKD_WORKER_FLUSH_INTERVAL", "often", "worker.flush_interval", "must be a duration"},
		{"TASKD_WORKER_MAX_BACKLOG", "0x", "worker.max_backlog", "must be an integer"},
		{"TASKD_WORKER_MAX_BACKLOG", "2000000", "worker.max_backlog", "must be 1..1000000, got 2000000"},
		{"TASKD_WORKER_MAX_SNOOZES", "-1", "worker.max_snoozes", "must be 1..1000000, got -1"},
		{"TASKD_WORKER_IN_SERVE", "2", "worker.in_serve", "true or false"},
		{"TASKD_WORKER_METRICS_ADDR", "9090", "worker.metrics_addr", "must be host:port"},
		{"TASKD_ADMIN_TOKEN", "short", "admin_token", "at least 16 characters, got 5"},
		{"TASKD_ADMIN_TOKEN", "has spaces in the middle", "admin_token", "must not contain spaces"},
		{"TASKD_MEMORY_LIMIT_MIB", "-1", "memory_limit_mib", "must not be negative"},
		{"TASKD_LOG_LEVEL", "loud", "log.level", `got "loud"`},
		{"TASKD_LOG_FORMAT", "xml", "log.format", `got "xml"`},
		{"TASKD_TELEMETRY_TRACES", "jaeger", "telemetry.traces", `got "jaeger"`},
		{"TASKD_TELEMETRY_SAMPLE_RATIO", "1.5", "telemetry.sample_ratio", "must be 0..1"},
		{"TASKD_TELEMETRY_SAMPLE_RATIO", "NaN", "telemetry.sample_ratio", "must be a number"},
		{"TASKD_TELEMETRY_SERVICE_NAME", " ", "telemetry.service_name", "must be set"},
		{"TASKD_TELEMETRY_PROMETHEUS", "yes", "telemetry.prometheus", "true or false"},
		{"TASKD_TELEMETRY_TRACE_URL", "http://jaeger:16686/trace/", "telemetry.trace_url", "must contain {trace_id}"},
		{"TASKD_TELEMETRY_TRACE_URL", "ftp://jaeger/{trace_id}", "telemetry.trace_url", "http or https URL"},
		{"TASKD_TELEMETRY_TRACE_URL", "/trace/{trace_id}", "telemetry.trace_url", "http or https URL"},
	}
	for _, c := range cases {
		t.Run(c.env+"="+c.val, func(t *testing.T) {
			t.Parallel()
			_, err := parse(t, "", envMap{c.env: c.val})
			wantKeyError(t, err, c.key, c.want)
		})
	}

	// Redis in cluster mode: db must be 0.
	_, err := parse(t, "", envMap{"TASKD_REDIS_CLUSTER": "true", "TASKD_REDIS_DB": "1"})
	wantKeyError(t, err, "redis.db", "must be 0 with redis.cluster", "TASKD_REDIS_DB")
	// An OTLP endpoint is checked only for the OTLP exporters.
	_, err = parse(t, "telemetry: {traces: otlp-http, endpoint: 'ftp://x'}", nil)
	wantKeyError(t, err, "telemetry.endpoint", "http(s) URL", "test.yaml line 1")
	mustParse(t, "telemetry: {traces: otlp-grpc, endpoint: 'collector:4317'}", nil)
	mustParse(t, "telemetry: {traces: otlp-http, endpoint: 'https://collector:4318/v1/traces'}", nil)
	// A trace URL: Jaeger's, Grafana's Explore (URL-encoded JSON around {trace_id}).
	mustParse(t, "", envMap{"TASKD_TELEMETRY_TRACE_URL": "http://127.0.0.1:16686/trace/{trace_id}"})
	mustParse(t, "", envMap{"TASKD_TELEMETRY_TRACE_URL": "https://grafana.example.com/explore?left=%7B%22datasource%22:%22tempo%22,%22queries%22:%5B%7B%22query%22:%22{trace_id}%22%7D%5D%7D"})
}

func TestYAMLErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml, key, want string
	}{
		{"unknown key", "http:\n  adr: x\n", "http.adr", "unknown key (from test.yaml line 2)"},
		{"unknown section", "cache:\n  size: 1\n", "cache", "unknown key"},
		{"duplicate key", "log:\n  level: info\n  level: debug\n", "log.level", "set twice (first on line 2)"},
		{"wrong type", "dispatch:\n  lease_ttl: 30\n", "dispatch.lease_ttl", `must be a duration such as 30s or 1m30s, got "30" (from test.yaml line 2)`},
		{"mapping for a value", "http:\n  addr: {host: x}\n", "http.addr", "must be a single value"},
		{"list for a section", "http: [1, 2]\n", "http", "must be a mapping"},
		{"nested list item", "redis:\n  addrs: [[a]]\n", "redis.addrs", "list items must be plain values"},
		{"validation names the line", "dispatch:\n  batch: 5000\n", "dispatch.batch", "must be 1..1000, got 5000 (from test.yaml line 2)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := parse(t, c.yaml, nil)
			wantKeyError(t, err, c.key, c.want)
		})
	}

	// Syntax errors and a second document are errors that name the file.
	for _, text := range []string{"http: [", "a: 1\n---\nb: 2\n"} {
		if _, err := parse(t, text, nil); err == nil || !strings.HasPrefix(err.Error(), "config: test.yaml: ") {
			t.Errorf("%q: error = %v, want one starting with config: test.yaml:", text, err)
		}
	}

	// Several problems are reported together.
	_, err := parse(t, "log: {level: loud, format: xml}\nsweep: {batch: -1}\n", nil)
	for _, key := range []string{"log.level", "log.format", "sweep.batch"} {
		wantKeyError(t, err, key)
	}
}

func TestYAMLForms(t *testing.T) {
	t.Parallel()
	// Lists as a sequence or a comma-separated string; anchors and aliases; a null
	// value keeps the default; numbers and booleans are accepted for strings.
	cfg := mustParse(t, `
redis:
  addrs: 127.0.0.1:1, 127.0.0.1:2,127.0.0.1:3
  key_prefix: &p "x:"
  username: 12
worker:
  categories:
    - wordcount
    - *p
http: {addr: ~, max_wait: 10s}
`, nil)
	if got, want := cfg.Redis.Addrs, []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("redis.addrs = %q, want %q", got, want)
	}
	if cfg.Redis.Cluster {
		t.Error("three addresses: redis.cluster set, want Redlock (not a Cluster)")
	}
	if got, want := cfg.Worker.Categories, []string{"wordcount", "x:"}; !reflect.DeepEqual(got, want) {
		t.Errorf("worker.categories = %q, want %q", got, want)
	}
	if cfg.Redis.Username != "12" || cfg.HTTP.Addr != taskd.HTTPAddrDefault || cfg.HTTP.MaxWait != 10*time.Second {
		t.Errorf("got username %q, http.addr %q, http.max_wait %v", cfg.Redis.Username, cfg.HTTP.Addr, cfg.HTTP.MaxWait)
	}
}

// TestSecretsStayHidden checks that the values of secret keys never show in
// errors.
func TestSecretsStayHidden(t *testing.T) {
	t.Parallel()
	const secret = "Sup3rSecretValue"
	for _, k := range Keys() {
		if !k.Secret {
			continue
		}
		_, err := parse(t, "", envMap{k.Env: secret, "TASKD_HTTP_ADDR": "bad " + "addr"})
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error shows the secret: %v", k.Env, err)
		}
	}
	_, err := parse(t, "", envMap{"TASKD_ADMIN_TOKEN": "tiny secret"})
	if err == nil || strings.Contains(err.Error(), "tiny secret") {
		t.Errorf("short admin token: error = %v, want one that does not show the token", err)
	}
}

// TestEveryKeyFromEnv checks that each key is read from its derived variable:
// every key has a distinct name, and setting it changes that key.
func TestEveryKeyFromEnv(t *testing.T) {
	t.Parallel()
	names := map[string]string{}
	for _, k := range Keys() {
		for _, n := range []string{k.Env, k.Alias} {
			if n == "" {
				continue
			}
			if other, dup := names[n]; dup {
				t.Errorf("%s names both %s and %s", n, other, k.Path)
			}
			names[n] = k.Path
		}
		if want := "TASKD_" + strings.ToUpper(strings.ReplaceAll(k.Path, ".", "_")); k.Env != want {
			t.Errorf("%s: env %s, want %s", k.Path, k.Env, want)
		}
	}
	for _, want := range []string{
		"TASKD_HTTP_ADDR", "TASKD_MYSQL_DSN", "TASKD_REDIS_ADDRS", "TASKD_REDIS_CLUSTER",
		"TASKD_ADMIN_TOKEN", "TASKD_LEASE_TTL", "TASKD_MAX_HOLD", "TASKD_SWEEP_INTERVAL",
	} {
		if _, ok := names[want]; !ok {
			t.Errorf("no key reads %s", want)
		}
	}

	// A valid value of each type that differs from every default.
	values := map[string]string{
		"duration": "7s", "int": "7", "float": "0.5", "bool": "true", "list": "127.0.0.1:7",
	}
	strs := map[string]string{
		"http.addr": "127.0.0.1:7", "mysql.dsn": "u:p@tcp(h:7)/d", "mysql.replica_dsn": "u:p@tcp(r:7)/d", "admin_token": "0123456789abcdef-7",
		"log.level": "debug", "log.format": "json", "telemetry.traces": "stdout",
		"telemetry.endpoint": "h:7", "redis.key_prefix": "seven:", "worker.metrics_addr": ":7",
		"sweep.interval": "7s", "http.metrics_addr": ":7", "http.metrics_token": "0123456789abcdef-7",
		"telemetry.trace_url": "http://h:7/trace/{trace_id}",
	}
	for _, k := range Keys() {
		val, ok := strs[k.Path]
		if !ok && k.Type == "string" {
			val = "seven"
		} else if !ok {
			val = values[k.Type]
		}
		env := envMap{k.Env: val}
		switch k.Path {
		case "worker.categories":
			env[k.Env] = "seven"
		case "http.trusted_proxies":
			env[k.Env] = "10.0.0.0/8, 2001:db8::/32, 192.0.2.7"
		case "redis.db":
			env[k.Env] = "7"
		case "http.idle_timeout", "http.read_timeout", "http.shutdown_timeout", "worker.shutdown_timeout":
		case "http.write_timeout":
			env[k.Env] = "2m"
		case "dispatch.lease_ttl":
			env[k.Env] = "7s"
		case "dispatch.max_hold":
			env[k.Env] = "1h"
		case "dispatch.skip_for", "dispatch.release_cooldown", "dispatch.poll_interval":
		case "redis.node_timeout", "worker.flush_interval":
			env[k.Env] = "7ms"
		}
		if k.Type == "bool" {
			env[k.Env] = strconv.FormatBool(!reflect.Indirect(k.field(Default())).Bool())
		}
		cfg, err := parse(t, "", env)
		if err != nil {
			t.Errorf("%s=%s: %v", k.Env, env[k.Env], err)
			continue
		}
		if cfg.Source(k.Path) != k.Env {
			t.Errorf("%s: source %q, want %s", k.Path, cfg.Source(k.Path), k.Env)
		}
		got := k.field(cfg).Interface()
		if def := k.field(Default()).Interface(); reflect.DeepEqual(got, def) && k.Path != "mysql.dsn" {
			t.Errorf("%s=%s left %s at its default %v", k.Env, env[k.Env], k.Path, def)
		}
	}
}

// TestRepoConfig loads the example config.yaml at the top of the repository: it
// must be valid as is and set every key, so that it documents them all.
func TestRepoConfig(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../../config.yaml", envMap{}.lookup)
	if err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	for _, k := range Keys() {
		if src := cfg.Source(k.Path); !strings.HasPrefix(src, "config.yaml line ") {
			t.Errorf("config.yaml does not set %s", k.Path)
		}
	}
	// It matches the servers `make run` starts (TASKD_SERVICES_PORT_BASE=26300).
	if got, want := cfg.Redis.Addrs, []string{"127.0.0.1:26379"}; !reflect.DeepEqual(got, want) {
		t.Errorf("redis.addrs = %v, want %v", got, want)
	}
	if !strings.HasSuffix(cfg.MySQL.DSN, "tcp(127.0.0.1:26306)/taskd") {
		t.Errorf("mysql.dsn = %q, want MariaDB on 127.0.0.1:26306, database taskd", cfg.MySQL.DSN)
	}
	makefile, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"RUN_PORT_BASE ?= 26300\n", "TASKD_SERVICES_PORT_BASE=$(RUN_PORT_BASE) TASKD_SERVICES_PROFILE=demo TASKD_SERVICES_DATABASE=taskd "} {
		if !strings.Contains(string(makefile), want) {
			t.Errorf("the Makefile does not start make run's servers as config.yaml expects: no %q", want)
		}
	}
	// Its values are the defaults, except where it points at local servers.
	def := Default()
	for _, k := range Keys() {
		switch k.Path {
		case "mysql.dsn", "redis.addrs", "admin_token":
			continue
		}
		if got, want := k.field(cfg).Interface(), k.field(def).Interface(); !reflect.DeepEqual(got, want) &&
			!(k.Type == "list" && reflect.ValueOf(got).Len() == 0 && reflect.ValueOf(want).Len() == 0) {
			t.Errorf("config.yaml sets %s to %v, the default is %v", k.Path, got, want)
		}
	}

	if _, err := Load("testdata/missing.yaml", nil); err == nil {
		t.Error("Load of a missing file: no error")
	}
}

// TestRepoConfigStatesPartDefaults ties the defaults config.yaml states to
// the constants declared by the parts that use them, and to the parts' own
// defaults for the options the engine gives them: a default changed in one
// place and not in config.yaml, or a part that defaults a value otherwise than
// taskd.Config, fails here.
func TestRepoConfigStatesPartDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := Load("../../config.yaml", envMap{}.lookup)
	if err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	apiDef := api.Config{}.WithDefaults()
	for _, c := range []struct {
		key       string
		file      any   // config.yaml's value
		constants []any // the part's constant, and the part's own default when it has one
	}{
		{"http.addr", cfg.HTTP.Addr, []any{taskd.HTTPAddrDefault}},
		{"telemetry.sample_ratio", *cfg.Telemetry.SampleRatio, []any{taskd.SampleRatioDefault}},
		{"telemetry.prometheus", cfg.Telemetry.Prometheus, []any{taskd.PrometheusDefault}},
		{"telemetry.keep_failed", *cfg.Telemetry.KeepFailed, []any{taskd.KeepFailedDefault}},
		{"telemetry.traces", cfg.Telemetry.Traces, []any{telemetry.TracesDefault}},
		{"telemetry.service_name", cfg.Telemetry.ServiceName, []any{telemetry.ServiceNameDefault}},
		{"http.max_wait", cfg.HTTP.MaxWait, []any{dispatcher.MaxWaitDefault, apiDef.MaxWait}},
		{"http.request_timeout", cfg.HTTP.RequestTimeout, []any{api.RequestTimeoutDefault, apiDef.RequestTimeout}},
		{"http.editor_cache_ttl", cfg.HTTP.EditorCacheTTL, []any{api.EditorCacheTTLDefault, apiDef.EditorCacheTTL}},
		{"http.max_polls_per_editor", cfg.HTTP.MaxPollsPerEditor, []any{api.MaxPollsPerEditorDefault, apiDef.MaxPollsPerEditor}},
		{"http.auth_failures", cfg.HTTP.AuthFailures, []any{api.AuthFailuresDefault, apiDef.AuthFailures}},
		{"http.auth_failure_window", cfg.HTTP.AuthFailureWindow, []any{api.AuthFailureWindowDefault, apiDef.AuthFailureWindow}},
		{"http.session_idle", cfg.HTTP.SessionIdle, []any{web.SessionIdleDefault}},
		{"http.session_lifetime", cfg.HTTP.SessionLifetime, []any{web.SessionLifetimeDefault}},
		{"redis.key_prefix", cfg.Redis.KeyPrefix, []any{dispatcher.KeyPrefixDefault}},
		{"redis.node_timeout", cfg.Redis.NodeTimeout, []any{locker.NodeTimeoutDefault}},
		{"dispatch.lease_ttl", cfg.Dispatch.LeaseTTL, []any{dispatcher.LeaseDefault}},
		{"dispatch.batch", cfg.Dispatch.Batch, []any{dispatcher.BatchDefault}},
		{"dispatch.poll_interval", cfg.Dispatch.PollInterval, []any{dispatcher.PollIntervalDefault}},
		{"dispatch.max_hold", cfg.Dispatch.MaxHold, []any{store.MaxHoldDefault}},
		{"dispatch.skip_for", cfg.Dispatch.SkipFor, []any{store.SkipForDefault}},
		{"dispatch.release_cooldown", cfg.Dispatch.ReleaseCooldown, []any{store.ReleaseCooldownDefault}},
		{"dispatch.group_commit", cfg.Dispatch.GroupCommit, []any{store.GroupCommitDefault}},
		{"sweep.batch", cfg.Sweep.Batch, []any{sweeper.BatchDefault}},
		{"sweep.workers", cfg.Sweep.Workers, []any{sweeper.WorkersDefault}},
		{"worker.concurrency", cfg.Worker.Concurrency, []any{worker.ConcurrencyDefault}},
		{"worker.shutdown_timeout", cfg.Worker.ShutdownTimeout, []any{worker.ShutdownTimeoutDefault}},
		{"worker.batch_size", cfg.Worker.BatchSize, []any{worker.BatchSizeDefault}},
		{"worker.flush_interval", cfg.Worker.FlushInterval, []any{worker.FlushIntervalDefault}},
		{"worker.max_backlog", cfg.Worker.MaxBacklog, []any{worker.MaxBacklogDefault}},
		{"worker.max_snoozes", cfg.Worker.MaxSnoozes, []any{worker.MaxSnoozesDefault}},
		{"webhook_delivery.poll_interval", cfg.WebhookDelivery.PollInterval, []any{delivery.PollIntervalDefault}},
		{"webhook_delivery.lease_ttl", cfg.WebhookDelivery.LeaseTTL, []any{delivery.LeaseTTLDefault}},
		{"webhook_delivery.batch", cfg.WebhookDelivery.Batch, []any{delivery.BatchDefault}},
		{"webhook_delivery.backoff_base", cfg.WebhookDelivery.BackoffBase, []any{delivery.BackoffBaseDefault}},
		{"webhook_delivery.backoff_max", cfg.WebhookDelivery.BackoffMax, []any{delivery.BackoffMaxDefault}},
	} {
		if !strings.HasPrefix(cfg.Source(c.key), "config.yaml line ") {
			t.Errorf("config.yaml does not state %s", c.key)
		}
		for _, want := range c.constants {
			if !reflect.DeepEqual(c.file, want) {
				t.Errorf("config.yaml states %s: %v, the part's default is %v", c.key, c.file, want)
			}
		}
	}

	// Only the two keys whose zero value means something else, and the
	// keys that point at local servers, differ from taskd.Config's defaults.
	zero := &Config{Config: taskd.Config{}.WithDefaults()}
	differ := []string{}
	for _, k := range Keys() {
		got, want := k.field(cfg).Interface(), k.field(zero).Interface()
		if !reflect.DeepEqual(got, want) && !(k.Type == "list" && reflect.ValueOf(got).Len() == 0 && reflect.ValueOf(want).Len() == 0) {
			differ = append(differ, k.Path)
		}
	}
	want := []string{"http.addr", "mysql.dsn", "redis.addrs", "admin_token", "telemetry.prometheus"}
	if !reflect.DeepEqual(differ, want) {
		t.Errorf("config.yaml differs from taskd.Config{}.WithDefaults() in %q, want %q", differ, want)
	}
}

// sweep.interval takes a plain duration or a cron spec, from the file and
// from the environment.
func TestSweepInterval(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		yaml, env string // one of them is set
		want      string
	}{
		{yaml: "sweep: {interval: 10s}", want: "10s"},
		{yaml: "sweep: {interval: 2m}", want: "2m"},
		{yaml: `sweep: {interval: "@every 30s"}`, want: "@every 30s"},
		{yaml: "sweep:\n  interval: '@hourly'\n", want: "@hourly"},
		{yaml: `sweep: {interval: "*/15 * * * * *"}`, want: "*/15 * * * * *"},
		{yaml: `sweep: {interval: "0 */5 * * *"}`, want: "0 */5 * * *"},
		{env: "1s", want: "1s"},
		{env: "@every 1s", want: "@every 1s"},
		{env: "0 0 9 * * MON-FRI", want: "0 0 9 * * MON-FRI"},
		{want: "10s"}, // the default
	} {
		env := envMap{}
		if c.env != "" {
			env["TASKD_SWEEP_INTERVAL"] = c.env
		}
		cfg, err := parse(t, c.yaml, env)
		if err != nil {
			t.Errorf("yaml %q, env %q: %v", c.yaml, c.env, err)
			continue
		}
		if cfg.Sweep.Schedule != c.want {
			t.Errorf("yaml %q, env %q: sweep.interval = %q, want %q", c.yaml, c.env, cfg.Sweep.Schedule, c.want)
		}
	}
	// A bad spec in the file names the key and the line.
	_, err := parse(t, "sweep:\n  interval: 'every ten seconds'\n", nil)
	wantKeyError(t, err, "sweep.interval", "want a duration, @every, a descriptor or a cron expression", "test.yaml line 2")
}

func TestZeroMeansDefault(t *testing.T) {
	t.Parallel()
	// A key set to its zero value takes its default, as in taskd.Config; a
	// negative editor cache TTL turns the cache off.
	cfg := mustParse(t, "http: {max_wait: 0s, editor_cache_ttl: 0s}\nworker: {concurrency: 0}\n", nil)
	def := Default()
	if cfg.HTTP.MaxWait != def.HTTP.MaxWait || cfg.HTTP.EditorCacheTTL != def.HTTP.EditorCacheTTL ||
		cfg.Worker.Concurrency != def.Worker.Concurrency || def.HTTP.EditorCacheTTL <= 0 {
		t.Errorf("zero values: max_wait %v, editor_cache_ttl %v, concurrency %d; want the defaults %v, %v, %d",
			cfg.HTTP.MaxWait, cfg.HTTP.EditorCacheTTL, cfg.Worker.Concurrency,
			def.HTTP.MaxWait, def.HTTP.EditorCacheTTL, def.Worker.Concurrency)
	}
	if cfg := mustParse(t, "http: {editor_cache_ttl: -1s}\n", nil); cfg.HTTP.EditorCacheTTL != -time.Second {
		t.Errorf("editor_cache_ttl -1s became %v", cfg.HTTP.EditorCacheTTL)
	}
}

func TestCategories(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, `
dispatch: {fair_share: true}
categories:
  - name: news
    stages: [edit, review]
    send_back_hold: 30m
    max_send_backs: 3
    weight: 3
  - name: labels
    overlap: 3
    rate_limit: 600
    agreement_field: score
    agreement_metric: interval
`, nil)
	want := []taskd.CategoryConfig{
		{Name: "news", Stages: []string{"edit", "review"}, Overlap: 1, SendBackHold: 30 * time.Minute, MaxSendBacks: 3, Weight: 3},
		{Name: "labels", Overlap: 3, SendBackHold: tasks.SendBackHoldDefault, MaxSendBacks: tasks.MaxSendBacksDefault, Weight: 1, RateLimit: 600,
			AgreementField: "score", AgreementMetric: "interval"},
	}
	if !reflect.DeepEqual(cfg.Categories, want) {
		t.Errorf("categories = %+v\nwant %+v", cfg.Categories, want)
	}
	if !cfg.Dispatch.FairShare {
		t.Error("dispatch.fair_share: true read as false")
	}
	if got := cfg.Source("categories[1].rate_limit"); got != "test.yaml line 11" {
		t.Errorf("source of categories[1].rate_limit = %q", got)
	}

	for _, c := range []struct {
		yaml, key string
		parts     []string
	}{
		{"categories:\n  - {name: a}\n  - {name: a}\n", "categories[1].name", []string{`"a" is the name of categories[0] too`, "test.yaml line 3"}},
		{"categories:\n  - {stages: [edit]}\n", "categories[0].name", []string{"is required"}},
		{"categories:\n  - {name: a, stages: [Edit]}\n", "categories[0].stages", []string{`stage "Edit" must be lowercase`}},
		{"categories:\n  - {name: a, stages: [edit, edit]}\n", "categories[0].stages", []string{`"edit" is listed twice`}},
		{"categories:\n  - {name: a, stages: [a, b, c, d, e, f, g, h, i]}\n", "categories[0].stages", []string{"at most 8 stages"}},
		{"categories:\n  - {name: a, overlap: 10}\n", "categories[0].overlap", []string{"must be 1..9, got 10"}},
		{"categories:\n  - {name: a, weight: -1}\n", "categories[0].weight", []string{"must be 1..1000, got -1"}},
		{"categories:\n  - {name: a, rate_limit: -5}\n", "categories[0].rate_limit", []string{"must be 0..1000000, got -5"}},
		{"categories:\n  - {name: a, max_in_flight: -1}\n", "categories[0].max_in_flight", []string{"must be 0..1000000, got -1"}},
		{"categories:\n  - {name: a, key_limit: 1000001}\n", "categories[0].key_limit", []string{"must be 0..1000000, got 1000001"}},
		{"categories:\n  - {name: a, send_back_hold: 10ms}\n", "categories[0].send_back_hold", []string{"must be at least 1s"}},
		{"categories:\n  - {name: a, max_send_backs: -1}\n", "categories[0].max_send_backs", []string{"must be 1..1000, got -1"}},
		{"categories:\n  - {name: a, max_send_backs: 1001}\n", "categories[0].max_send_backs", []string{"must be 1..1000, got 1001"}},
		{"categories:\n  - {name: a, agreement_field: a.b}\n", "categories[0].agreement_field", []string{"must be ASCII letters"}},
		{"categories:\n  - {name: a, agreement_metric: ordinal}\n", "categories[0].agreement_metric", []string{`must be nominal or interval, not "ordinal"`}},
		{"categories:\n  - {name: a, instructions: x, instructions_file: a.md}\n", "categories[0].instructions_file", []string{"not both"}},
		{"categories:\n  - {name: a, gold: {rule: majority}}\n", "categories[0].gold", []string{`gold rule must be decision or fields, not "majority"`}},
		{"categories:\n  - {name: a, gold: {rule: fields}}\n", "categories[0].gold", []string{"gold fields must list 1..32 fields"}},
		{"categories:\n  - {name: a, gold: {rule: decision, rate: 1.5}}\n", "categories[0].gold", []string{"gold rate must be 0..1"}},
		{"categories:\n  - {name: a, gold: {rule: decision, min_accuracy: 0.8, min_answers: 2000}}\n", "categories[0].gold", []string{"min_answers must be 1..1000"}},
		{"categories:\n  - {name: a, colour: red}\n", "categories[0].colour", []string{"unknown key"}},
		{"categories:\n  - {name: a, hedge: {before_due: 10m}}\n", "categories[0].hedge", []string{"both before_due and inactive_for"}},
		{"categories:\n  - {name: a, hedge: {before_due: 10m, inactive_for: 10ms}}\n", "categories[0].hedge", []string{"at least 1s"}},
		{"categories:\n  - {name: a, hedge: {after: 1m}}\n", "categories[0].hedge.after", []string{"unknown key"}},
	} {
		_, err := parse(t, c.yaml, nil)
		wantKeyError(t, err, c.key, c.parts...)
	}
}

func TestSchedules(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, `
schedules:
  - name: digest
    spec: "0 0 6 * * MON-FRI"
    category: digests
    title: Morning digest
    payload: {edition: morning, sections: [politics, sport], pages: 4}
    priority: 5
  - name: links
    spec: "@every 1h"
    category: maintenance
    title: Check links
`, nil)
	want := []taskd.ScheduleConfig{
		{Name: "digest", Spec: "0 0 6 * * MON-FRI", Category: "digests", Title: "Morning digest", Priority: 5,
			Payload: map[string]any{"edition": "morning", "sections": []any{"politics", "sport"}, "pages": 4}},
		{Name: "links", Spec: "@every 1h", Category: "maintenance", Title: "Check links"},
	}
	if !reflect.DeepEqual(cfg.Schedules, want) {
		t.Errorf("schedules = %+v\nwant %+v", cfg.Schedules, want)
	}
	if got := cfg.Source("schedules[1].spec"); got != "test.yaml line 10" {
		t.Errorf("source of schedules[1].spec = %q", got)
	}
	if cfg := mustParse(t, "schedules: []\n", nil); len(cfg.Schedules) != 0 {
		t.Errorf("empty schedules = %+v", cfg.Schedules)
	}

	item := "  - {name: a, spec: '@hourly', category: c, title: t}\n"
	for _, c := range []struct {
		yaml, key string
		parts     []string
	}{
		{"schedules:\n  - {name: a, spec: 'every hour', category: c, title: t}\n", "schedules[0].spec", []string{"want a duration", "test.yaml line 2"}},
		{"schedules:\n" + item + item, "schedules[1].name", []string{`"a" is the name of schedules[0] too`, "test.yaml line 3"}},
		{"schedules:\n  - {name: a, spec: '@hourly', category: c, title: t, colour: red}\n", "schedules[0].colour", []string{"unknown key"}},
		{"schedules:\n  - {name: a, spec: '@hourly', category: c, title: t, priority: high}\n", "schedules[0].priority", []string{"must be an integer"}},
		{"schedules:\n  - {name: a, spec: '@hourly', category: c, title: t, payload: [1]}\n", "schedules[0].payload", []string{"must be a mapping"}},
		{"schedules:\n  - {name: a, spec: '@hourly', category: c, title: t, limit_key: ' x'}\n", "schedules[0].limit_key", []string{"limit_key", "test.yaml line 2"}},
		{"schedules:\n  - {name: a, spec: '@hourly', title: t}\n", "schedules[0].category", []string{"category is required", "test.yaml line 2"}},
		{"schedules:\n  - {name: a, spec: '@hourly', category: c, title: t, payload: {a: {1: x}}}\n", "schedules[0].payload", []string{"cannot be JSON"}},
		{"schedules:\n  - just a string\n", "schedules[0]", []string{"must be a mapping"}},
		{"schedules: {name: a}\n", "schedules", []string{"must be a list"}},
	} {
		_, err := parse(t, c.yaml, nil)
		wantKeyError(t, err, c.key, c.parts...)
	}
}

// TestTelemetryZeroesAreSaid: telemetry.sample_ratio 0 and keep_failed false,
// in the file or the environment, stay 0 and false through the defaults,
// which apply only to keys left out.
func TestTelemetryZeroesAreSaid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		yaml string
		env  envMap
	}{
		{"file", "telemetry:\n  sample_ratio: 0\n  keep_failed: false\n", nil},
		{"environment", "", envMap{"TASKD_TELEMETRY_SAMPLE_RATIO": "0", "TASKD_TELEMETRY_KEEP_FAILED": "false"}},
	} {
		cfg, err := parse(t, c.yaml, c.env)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		d := cfg.WithDefaults().Telemetry
		if *d.SampleRatio != 0 || *d.KeepFailed {
			t.Errorf("%s: sample_ratio %v, keep_failed %v after the defaults, want 0 and false", c.name, *d.SampleRatio, *d.KeepFailed)
		}
	}
	cfg, err := parse(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.Telemetry; *d.SampleRatio != taskd.SampleRatioDefault || *d.KeepFailed != taskd.KeepFailedDefault {
		t.Errorf("left out: sample_ratio %v, keep_failed %v, want the defaults", *d.SampleRatio, *d.KeepFailed)
	}
}

// Retention: left out, each kind takes its default; 0, in the file or the
// environment, keeps that kind forever, and reaches the sweeper as 0.
func TestRetentionZeroKeepsForever(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, "", nil)
	r := cfg.Retention
	if *r.Done != sweeper.RetentionDoneDefault || *r.Cancelled != sweeper.RetentionCancelledDefault ||
		*r.Dead != sweeper.RetentionDeadDefault || *r.Webhooks != sweeper.RetentionWebhooksDefault || r.Batch != sweeper.RetentionBatchDefault {
		t.Errorf("left out: %v %v %v %v %d, want the defaults", *r.Done, *r.Cancelled, *r.Dead, *r.Webhooks, r.Batch)
	}
	if *r.Dead <= *r.Done {
		t.Errorf("dead tasks kept %v, not longer than done ones (%v)", *r.Dead, *r.Done)
	}
	cfg = mustParse(t, "retention:\n  done: 0\n  dead: 1h\n", envMap{"TASKD_RETENTION_WEBHOOKS": "0"})
	r = cfg.Retention
	if *r.Done != 0 || *r.Dead != time.Hour || *r.Webhooks != 0 || *r.Cancelled != sweeper.RetentionCancelledDefault {
		t.Errorf("done 0, dead 1h, webhooks 0: got %v %v %v, cancelled %v", *r.Done, *r.Dead, *r.Webhooks, *r.Cancelled)
	}
}

// A category's hedge is a nested section of the item.
func TestCategoryHedge(t *testing.T) {
	t.Parallel()
	cfg := mustParse(t, "categories:\n  - name: news\n    hedge: {before_due: 10m, inactive_for: 2m}\n", nil)
	if len(cfg.Categories) != 1 {
		t.Fatalf("categories = %+v", cfg.Categories)
	}
	if got, want := cfg.Categories[0].Hedge, (taskd.HedgeConfig{BeforeDue: 10 * time.Minute, InactiveFor: 2 * time.Minute}); got != want {
		t.Errorf("hedge = %+v, want %+v", got, want)
	}
	if got := cfg.Source("categories[0].hedge.before_due"); got != "test.yaml line 3" {
		t.Errorf("source of categories[0].hedge.before_due = %q", got)
	}
}
