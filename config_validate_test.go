package taskd_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/tasks"
)

// TestValidateWorkerCategories checks that worker.categories are held to the
// rule of every category (tasks.CheckCategory), so that the workers never
// refuse what the configuration's validation let through.
func TestValidateWorkerCategories(t *testing.T) {
	t.Parallel()
	for cat, want := range map[string]string{
		"news ": "spaces",
		"":      "required",
		strings.Repeat("c", tasks.MaxCategoryLen+1): "characters",
	} {
		cfg := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(db:3306)/taskd"}, Worker: taskd.WorkerConfig{Categories: []string{cat}}}
		var ce *taskd.ConfigError
		err := cfg.WithDefaults().Validate()
		if !errors.As(err, &ce) || ce.Key != "worker.categories" || !strings.Contains(ce.Msg, want) {
			t.Errorf("category %q: error %v, want worker.categories saying %q", cat, err, want)
		}
	}
	cfg := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(db:3306)/taskd"}, Worker: taskd.WorkerConfig{Categories: []string{"news"}}}
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Errorf("category news: %v", err)
	}
}

// TestValidateTraceURL checks telemetry.trace_url: empty, or an http(s) URL
// with {trace_id} in it; the error names the key.
func TestValidateTraceURL(t *testing.T) {
	t.Parallel()
	for u, want := range map[string]string{
		"http://jaeger:16686/trace/": "must contain {trace_id}",
		"jaeger:16686/{trace_id}":    "http or https URL",
		"https:///trace/{trace_id}":  "http or https URL",
		"{trace_id}":                 "http or https URL",
	} {
		cfg := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(db:3306)/taskd"}, Telemetry: taskd.TelemetryConfig{TraceURL: u}}
		var ce *taskd.ConfigError
		err := cfg.WithDefaults().Validate()
		if !errors.As(err, &ce) || ce.Key != "telemetry.trace_url" || !strings.Contains(ce.Msg, want) {
			t.Errorf("trace URL %q: error %v, want telemetry.trace_url saying %q", u, err, want)
		}
	}
	for _, u := range []string{"", "http://127.0.0.1:16686/trace/{trace_id}", "https://grafana.example.com/explore?trace={trace_id}"} {
		cfg := taskd.Config{MySQL: taskd.MySQLConfig{DSN: "u:p@tcp(db:3306)/taskd"}, Telemetry: taskd.TelemetryConfig{TraceURL: u}}
		if err := cfg.WithDefaults().Validate(); err != nil {
			t.Errorf("trace URL %q: %v", u, err)
		}
	}
}

// TestMySQLServer: what error messages name as the MySQL server, for one
// address and for the nodes of a cluster.
func TestMySQLServer(t *testing.T) {
	for dsn, want := range map[string]string{
		"u:p@tcp(db1:3306)/taskd?parseTime=true":                   "db1:3306/taskd",
		"u:p@tcp(db1:3306,db2:3306,db3:3306)/taskd?parseTime=true": "db1:3306,db2:3306,db3:3306/taskd",
		"u:p@tcp(db1:3306,db2:3306)/taskd":                         "db1:3306,db2:3306/taskd",
	} {
		if got := (taskd.MySQLConfig{DSN: dsn}).Server(); got != want {
			t.Errorf("Server of %s = %q, want %q", dsn, got, want)
		}
	}
}
