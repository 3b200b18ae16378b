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
