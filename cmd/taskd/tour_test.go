package main

import (
	"os"
	"strings"
	"testing"

	"github.com/taskd/taskd/internal/config"
)

// TestReadmeTourIsTheDevTour checks that README.md's tour is the one
// `taskd dev` prints, with config.yaml's address and admin token and a
// placeholder for the editor's token.
func TestReadmeTourIsTheDevTour(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## A tour\n")
	if !ok {
		t.Fatal(`README.md has no "## A tour" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "\n```sh\n")
	if !ok {
		t.Fatal("README.md's tour has no ```sh block")
	}
	block, _, _ = strings.Cut(block, "```\n")

	cfg, err := config.Load("../../config.yaml", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if err := writeTour(&want, tourValues{
		Base:        "http://" + reachable(cfg.HTTP.Addr),
		EditorToken: "…", EditorNote: "a demo editor's token, printed by make run",
		AdminToken: cfg.AdminToken, AdminNote: "admin_token in config.yaml",
	}); err != nil {
		t.Fatal(err)
	}
	if block != want.String() {
		gl, wl := strings.Split(block, "\n"), strings.Split(want.String(), "\n")
		for i := range max(len(gl), len(wl)) {
			g, w := "(none)", "(none)"
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("README.md's tour differs from the one taskd dev prints (cmd/taskd/tour.go) at line %d:\nREADME:    %q\ntaskd dev: %q", i+1, g, w)
			}
		}
	}
}
