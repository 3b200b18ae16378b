package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/store"
)

func TestE2EPauseResume(t *testing.T) {
	t.Parallel()
	env := servicesEnv(t)
	ctx := context.Background()
	db, err := store.Open(ctx, strings.TrimPrefix(env[0], "TASKD_MYSQL_DSN="))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	paused := func() []string {
		t.Helper()
		var cats []string
		if err := db.SelectContext(ctx, &cats, `SELECT category FROM paused_categories ORDER BY category`); err != nil {
			t.Fatal(err)
		}
		return cats
	}

	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"pause"}, "want one CATEGORY, got 0 arguments"},
		{[]string{"resume", "a", "b"}, "want one CATEGORY, got 2 arguments"},
		{[]string{"pause", " news"}, "category must not start or end with spaces"},
		{[]string{"resume", strings.Repeat("x", 65)}, "category must be 1..64 characters"},
		{[]string{"pause", "-until", "x", "news"}, "flag provided but not defined"},
	} {
		_, stderr, code := run(t, env, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.says) {
			t.Errorf("taskd %q: exit %d, stderr %q; want 2 saying %q", c.args, code, stderr, c.says)
		}
	}
	if got := paused(); len(got) != 0 {
		t.Fatalf("refused commands paused %v", got)
	}

	steps := []struct {
		args   []string
		says   string
		paused []string
	}{
		{[]string{"pause", "news"}, `paused category "news": nothing in it is handed out`, []string{"news"}},
		{[]string{"pause", "news"}, `category "news" was already paused (since 20`, []string{"news"}},
		{[]string{"pause", "sport"}, `paused category "sport"`, []string{"news", "sport"}},
		{[]string{"resume", "news"}, `resumed category "news": its tasks are handed out again`, []string{"sport"}},
		{[]string{"resume", "news"}, `category "news" was not paused; nothing changed`, []string{"sport"}},
	}
	for _, s := range steps {
		stdout, stderr, code := run(t, env, s.args...)
		if code != exitOK || !strings.Contains(stdout, s.says) {
			t.Errorf("taskd %q: exit %d, stdout %q, stderr %q; want 0 saying %q", s.args, code, stdout, stderr, s.says)
		}
		if got := paused(); strings.Join(got, ",") != strings.Join(s.paused, ",") {
			t.Errorf("after taskd %q: paused %v, want %v", s.args, got, s.paused)
		}
	}

	stdout, _, code := run(t, env, "status")
	if code != exitOK || !strings.Contains(stdout, "PAUSED (nothing handed out)  sport") {
		t.Errorf("status: exit %d, does not show the pause:\n%s", code, stdout)
	}
	stdout, _, code = run(t, env, "status", "-json")
	var rep struct {
		Paused []string `json:"paused"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &rep) != nil || len(rep.Paused) != 1 || rep.Paused[0] != "sport" {
		t.Errorf("status -json: exit %d, paused %v: %s", code, rep.Paused, stdout)
	}
	stdout, _, code = run(t, env, "pause", "-help")
	if code != exitOK || !strings.Contains(stdout, "Usage: taskd pause [flags] CATEGORY") {
		t.Errorf("pause -help: exit %d:\n%s", code, stdout)
	}
}
