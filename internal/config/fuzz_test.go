package config

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary YAML and environments to Parse (Load without the
// file read). It must never panic, every configuration it accepts must
// validate, and every error must say it is about the configuration. `go test`
// runs the seeds below and those in testdata/fuzz/FuzzLoad; `go test -fuzz
// FuzzLoad` explores further.
//
// The environment is text with one NAME=VALUE per line.
func FuzzLoad(f *testing.F) {
	repo, err := os.ReadFile("../../config.yaml")
	if err != nil {
		f.Fatalf("read the example config: %v", err)
	}
	seeds := []struct{ yaml, env string }{
		{string(repo), ""},
		{string(repo), "TASKD_LEASE_TTL=5ms\nTASKD_REDIS_ADDRS=a:1,b:2,c:3"},
		{"", "TASKD_MYSQL_DSN=u:p@tcp(h:1)/d"},
		{"", ""},
		{"mysql: {dsn: 'u:p@tcp(h:1)/d'}\nredis: {cluster: true, db: 1}", ""},
		{"http:\n  adr: x\n", "TASKD_MYSQL_DSN=u:p@tcp(h:1)/d"},
		{"log:\n  level: info\n  level: debug\n", ""},
		{"a: &a [*a]", ""},
		{"http: &h {addr: ':1'}\nmysql: {dsn: 'u@/d'}\nsweep: *h", ""},
		{"redis:\n  addrs: [[x]]\n  key_prefix: '{'", "TASKD_TELEMETRY_SAMPLE_RATIO=NaN"},
		{"- 1\n- 2", "TASKD_DISPATCH_BATCH=99999999999999999999"},
		{"mysql: {dsn: 'u@/d'}\n---\nx: 1", ""},
		{"mysql:\n  dsn: u@/d\ndispatch:\n  lease_ttl: 1s\n  max_hold: 1s\nredis:\n  node_timeout: 333ms", "TASKD_HTTP_MAX_WAIT=0s"},
		{"? [a, b]\n: c", ""},
		{"\xff\xfe", "TASKD_ADMIN_TOKEN=\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"},
	}
	for _, s := range seeds {
		f.Add([]byte(s.yaml), s.env)
	}
	f.Fuzz(func(t *testing.T, data []byte, envText string) {
		env := envMap{}
		for line := range strings.Lines(envText) {
			name, val, _ := strings.Cut(strings.TrimRight(line, "\n"), "=")
			env[name] = val
		}
		cfg, err := Parse(data, "fuzz.yaml", env.lookup)
		if err != nil {
			if cfg != nil {
				t.Errorf("Parse returned a config with error %v", err)
			}
			for _, e := range flatten(err) {
				var ke *KeyError
				if !errors.As(e, &ke) && !strings.HasPrefix(e.Error(), "config: ") {
					t.Errorf("error %q is neither a KeyError nor prefixed with config:", e)
				}
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Errorf("Parse accepted a config that does not validate: %v", err)
		}
		if cfg.MySQL.DSN == "" || len(cfg.Redis.Addrs) == 0 || cfg.Dispatch.LeaseTTL <= 0 {
			t.Errorf("accepted config lacks essentials: %+v", cfg)
		}
	})
}
