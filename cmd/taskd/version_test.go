package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionOfBuildInfo checks what `taskd version` makes of the build
// information: the module version, the revision with its modified flag, the
// commit time, the Go version and the platform built for.
func TestVersionOfBuildInfo(t *testing.T) {
	t.Parallel()
	bi := &debug.BuildInfo{
		GoVersion: "go1.26.8",
		Main:      debug.Module{Path: "github.com/taskd/taskd", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{
			{Key: "GOOS", Value: "linux"},
			{Key: "GOARCH", Value: "arm64"},
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	}
	var out strings.Builder
	versionOf(bi).write(&out)
	want := `taskd v1.4.0
module    github.com/taskd/taskd
revision  0123456789abcdef0123456789abcdef01234567 (modified: built with uncommitted changes)
committed 2026-12-01T10:00:00Z
go        go1.26.8 linux/arm64
`
	if out.String() != want {
		t.Errorf("version:\n%s\nwant:\n%s", out.String(), want)
	}

	bi.Main.Version, bi.Settings = "", nil
	out.Reset()
	versionOf(bi).write(&out)
	if !strings.HasPrefix(out.String(), "taskd (devel)\n") || !strings.Contains(out.String(), "revision  unknown (built without VCS information)\n") {
		t.Errorf("version without VCS information:\n%s", out.String())
	}
}

// TestVersionCommand checks `taskd version`, `taskd -version` and `taskd
// version -json` on the binary built from this checkout: the JSON names the
// module, and when the checkout is one the go command stamps (a .git
// directory at the top; not a linked worktree, whose .git is a file the go
// command does not follow), the revision is git's HEAD.
func TestVersionCommand(t *testing.T) {
	t.Parallel()
	bin := taskdBin(t)
	human, stderr, code := run(t, nil, "version")
	if code != exitOK || stderr != "" {
		t.Fatalf("taskd version: exit %d, stderr %q", code, stderr)
	}
	flag, _, code := run(t, nil, "-version")
	if code != exitOK || flag != human {
		t.Errorf("taskd -version: exit %d:\n%s\nwant what taskd version prints:\n%s", code, flag, human)
	}
	out, _, code := run(t, nil, "version", "-json")
	var v buildVersion
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil {
		t.Fatalf("taskd version -json: exit %d, %v:\n%s", code, err, out)
	}
	if v.Module != "github.com/taskd/taskd" || v.Version == "" || !strings.HasPrefix(v.Go, "go1.") {
		t.Errorf("taskd version -json = %+v, want module github.com/taskd/taskd, a version and the Go version", v)
	}
	if !strings.HasPrefix(human, "taskd "+v.Version+"\n") {
		t.Errorf("taskd version:\n%s\nwant it to start with %q", human, "taskd "+v.Version)
	}

	// What the go command recorded in the binary, read by the go command.
	gov, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	recorded := ""
	for line := range strings.Lines(string(gov)) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "vcs.revision=") {
			recorded = strings.TrimPrefix(f[1], "vcs.revision=")
		}
	}
	if v.Revision != recorded {
		t.Errorf("taskd version -json revision %q, but the binary records %q", v.Revision, recorded)
	}
	goflags, err := exec.Command("go", "env", "GOFLAGS").Output()
	if err != nil {
		t.Fatalf("go env GOFLAGS: %v", err)
	}
	fi, err := os.Stat(filepath.Join("..", "..", ".git"))
	if err != nil || !fi.IsDir() || strings.Contains(string(goflags), "-buildvcs=false") {
		t.Logf("not checking the revision against git: the checkout has no .git directory (a linked worktree, or no git), or GOFLAGS has -buildvcs=false; revision %q", v.Revision)
		return
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Logf("not checking the revision against git: git rev-parse HEAD: %v", err)
		return
	}
	if want := strings.TrimSpace(string(head)); v.Revision != want {
		t.Errorf("taskd version -json revision %q, want git's HEAD %s", v.Revision, want)
	}
}
