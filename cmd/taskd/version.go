package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// buildVersion is what the build info says about the binary: the module
// version, the VCS revision it was built from, and the Go toolchain.
type buildVersion struct {
	// Module is the main module's path and Version its version: a release tag
	// such as v1.2.0, a pseudo-version, or "(devel)" for a build from a
	// checkout without a tag.
	Module  string `json:"module"`
	Version string `json:"version"`
	// Revision is the VCS revision (a git commit) and Time its commit time
	// (RFC 3339); both empty when the binary was built without VCS
	// information (-buildvcs=false, or from outside a checkout).
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	// Modified says the checkout had uncommitted changes when it was built.
	Modified bool   `json:"modified"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// readVersion reads the running binary's build info; ok is false when the
// binary has none (built without module support).
func readVersion() (v buildVersion, ok bool) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return buildVersion{Version: "unknown", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}, false
	}
	return versionOf(bi), true
}

// versionOf extracts the version of bi: its main module, the vcs.* settings
// the go command stamps from the checkout, and the GOOS/GOARCH it was built
// for.
func versionOf(bi *debug.BuildInfo) buildVersion {
	v := buildVersion{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	goos, goarch := runtime.GOOS, runtime.GOARCH
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		case "GOOS":
			goos = s.Value
		case "GOARCH":
			goarch = s.Value
		}
	}
	v.Platform = goos + "/" + goarch
	return v
}

// write prints v as `taskd version` does: the version on the first line,
// then one line per fact.
func (v buildVersion) write(w io.Writer) {
	fmt.Fprintf(w, "taskd %s\n", v.Version)
	if v.Module != "" {
		fmt.Fprintf(w, "module    %s\n", v.Module)
	}
	switch {
	case v.Revision == "":
		fmt.Fprintln(w, "revision  unknown (built without VCS information)")
	case v.Modified:
		fmt.Fprintf(w, "revision  %s (modified: built with uncommitted changes)\n", v.Revision)
	default:
		fmt.Fprintf(w, "revision  %s\n", v.Revision)
	}
	if v.Time != "" {
		fmt.Fprintf(w, "committed %s\n", v.Time)
	}
	fmt.Fprintf(w, "go        %s %s\n", v.Go, v.Platform)
}

// runVersion prints the binary's version and build.
func runVersion(_ context.Context, a *app, args []string) error {
	// No -config: the version reads nothing but the binary.
	fs := flag.NewFlagSet("taskd version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := &cmdFlags{FlagSet: fs, name: "version", synopsis: "version [flags]", about: `
Prints the version of this binary from the build information Go records in it:
the module version (a release tag, or "(devel)" for a build from a checkout),
the git revision it was built from, whether the checkout had uncommitted
changes, the commit time, and the Go version and platform it was built with.
Needs nothing: no configuration, no store.`}
	asJSON := fs.Bool("json", false, "print one JSON object (module, version, revision, time, modified, go, platform)")
	if err := a.parse(f, args); err != nil {
		return err
	}
	if err := noArgs(f); err != nil {
		return err
	}
	v, _ := readVersion()
	if *asJSON {
		enc := json.NewEncoder(a.stdout)
		return enc.Encode(v)
	}
	v.write(a.stdout)
	return nil
}
