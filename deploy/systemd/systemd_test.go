// Package systemd holds the test of the systemd units of this folder:
// systemd-analyze verify accepts them, they keep their sandboxing, and they
// give taskd the time its drain takes on stop.
package systemd

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/taskd/taskd"
	"github.com/taskd/taskd/internal/testenv"
)

// units are the unit files of the folder.
var units = []string{"taskd.service", "taskd-worker.service"}

// binary is where the units expect the taskd binary.
const binary = "/usr/local/bin/taskd"

// parse returns the settings of a unit file as "Section.Key" → values, in
// order (a key may be given several times).
func parse(t *testing.T, b []byte) map[string][]string {
	t.Helper()
	settings := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = strings.Trim(line, "[]")
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("line %q is no setting", line)
			}
			settings[section+"."+k] = append(settings[section+"."+k], v)
		}
	}
	return settings
}

// TestUnitsVerify runs systemd-analyze verify on each unit, with ExecStart's
// binary replaced by an executable of the test's (verify needs it to exist);
// any message it prints fails the test, since it only warns about unknown
// keys and values it cannot parse.
func TestUnitsVerify(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		msg := "systemd-analyze not found: install Debian's systemd package (apt-get install systemd; scripts/services.sh up does it as root)"
		if os.Getenv(testenv.RequireServicesVar) == "1" {
			t.Fatalf("%s, and %s=1", msg, testenv.RequireServicesVar)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	stub := filepath.Join(dir, "taskd")
	if err := os.WriteFile(stub, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, unit := range units {
		b, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte(binary+" ")) {
			t.Fatalf("%s does not run %s", unit, binary)
		}
		if err := os.WriteFile(filepath.Join(dir, unit), bytes.ReplaceAll(b, []byte(binary), []byte(stub)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, unit := range units {
		cmd := exec.CommandContext(ctx, analyze, "verify", "--man=no", filepath.Join(dir, unit))
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil || len(bytes.TrimSpace(out)) > 0 {
			t.Errorf("systemd-analyze verify %s: %v\n%s", unit, err, out)
		}
	}
}

// TestUnitsSandbox checks that each unit keeps its sandboxing and stops
// taskd with SIGTERM, giving it longer than its drain.
func TestUnitsSandbox(t *testing.T) {
	t.Parallel()
	defaults := taskd.Config{}.WithDefaults()
	drain := map[string]time.Duration{
		// http.shutdown_timeout, then the workers' (worker.in_serve).
		"taskd.service":        defaults.HTTP.ShutdownTimeout + defaults.Worker.ShutdownTimeout,
		"taskd-worker.service": defaults.Worker.ShutdownTimeout,
	}
	want := map[string]string{
		"Service.DynamicUser":              "yes",
		"Service.ProtectSystem":            "strict",
		"Service.ProtectHome":              "yes",
		"Service.PrivateTmp":               "yes",
		"Service.PrivateDevices":           "yes",
		"Service.NoNewPrivileges":          "yes",
		"Service.RestrictAddressFamilies":  "AF_INET AF_INET6 AF_UNIX",
		"Service.CapabilityBoundingSet":    "",
		"Service.MemoryDenyWriteExecute":   "yes",
		"Service.RestrictNamespaces":       "yes",
		"Service.LockPersonality":          "yes",
		"Service.KillSignal":               "SIGTERM",
		"Service.RestartPreventExitStatus": "2",
	}
	for _, unit := range units {
		b, err := os.ReadFile(unit)
		if err != nil {
			t.Fatal(err)
		}
		s := parse(t, b)
		for k, v := range want {
			if got := s[k]; !slices.Equal(got, []string{v}) {
				t.Errorf("%s: %s = %q, want %q", unit, k, got, v)
			}
		}
		if f := s["Service.SystemCallFilter"]; !slices.Contains(f, "@system-service") {
			t.Errorf("%s: SystemCallFilter %q, want @system-service", unit, f)
		}
		if got := s["Service.ExecStart"]; len(got) != 1 || !strings.Contains(got[0], "-config /etc/taskd/config.yaml") {
			t.Errorf("%s: ExecStart %q, want taskd with -config /etc/taskd/config.yaml", unit, got)
		}
		stop := s["Service.TimeoutStopSec"]
		if len(stop) != 1 {
			t.Errorf("%s: TimeoutStopSec %q, want one", unit, stop)
			continue
		}
		d, err := time.ParseDuration(stop[0])
		if err != nil {
			t.Errorf("%s: TimeoutStopSec %q: %v", unit, stop[0], err)
		} else if d <= drain[unit] {
			t.Errorf("%s: TimeoutStopSec %s, want more than taskd's drain %s, or systemd kills it mid-drain", unit, d, drain[unit])
		}
	}
}
