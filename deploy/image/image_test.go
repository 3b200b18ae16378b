// Package image holds the test of the repository's Containerfile: the image
// it builds runs the static taskd binary from scratch, as a non-root user.
package image

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/taskd/taskd/internal/store/storetest"
	"github.com/taskd/taskd/internal/testenv"
)

// root is the repository's top directory, the Containerfile's.
const root = "../.."

// lookBuildah finds buildah, or skips the test (fails it under
// TASKD_TEST_REQUIRE_SERVICES=1).
func lookBuildah(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("buildah")
	if err == nil {
		return p
	}
	msg := "buildah not found: install Debian's buildah package (apt-get install buildah; scripts/services.sh up does it as root)"
	if os.Getenv(testenv.RequireServicesVar) == "1" {
		t.Fatalf("%s, and %s=1", msg, testenv.RequireServicesVar)
	}
	t.Skip(msg)
	return ""
}

// run runs name with args in dir and returns its stdout; it fails the test
// with the output when the command fails.
func run(t *testing.T, ctx context.Context, dir, name string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errOut.String())
	}
	return out.String()
}

// TestContainerfileBuildsAStaticImage builds the binary as `make image` does
// (static, -trimpath), builds the image from the Containerfile with buildah
// offline (TASKD_BUILD=prebuilt, storage of its own), then runs the image's
// /taskd from its mounted root filesystem and checks the image's
// configuration: the entrypoint, a numeric non-root user, the ports, the CA
// bundle, and no dynamic loader in the binary. With the services, the image's
// binary migrates, serves and works with the Kubernetes ConfigMap's
// config.yaml, answering the probes the Deployments use.
func TestContainerfileBuildsAStaticImage(t *testing.T) {
	buildah := lookBuildah(t)
	if os.Geteuid() != 0 {
		// buildah mount needs root (or `buildah unshare`, which the test does not do).
		t.Skip("buildah mount needs root: run as root (as CI does) to build and run the image")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	// A context of its own: the Containerfile, .containerignore and bin/image/.
	dir := t.TempDir()
	for _, name := range []string{"Containerfile", ".containerignore"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "bin", "image", "taskd")
	start := time.Now()
	run(t, ctx, root, "go", []string{"CGO_ENABLED=0"}, "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/taskd")
	t.Logf("go build (static): %s", time.Since(start).Round(time.Millisecond))
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("the CA bundle the image takes (Debian's ca-certificates): %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "image", "ca-certificates.crt"), certs, 0o644); err != nil {
		t.Fatal(err)
	}

	// Storage of its own, removed with the temporary directory.
	store := t.TempDir()
	b := func(args ...string) string {
		t.Helper()
		global := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
		return strings.TrimSpace(run(t, ctx, dir, buildah, nil, append(global, args...)...))
	}
	const tag = "localhost/taskd:test"
	start = time.Now()
	b("bud", "--isolation", "chroot", "--build-arg", "TASKD_BUILD=prebuilt", "-t", tag, ".")
	t.Logf("buildah bud: %s", time.Since(start).Round(time.Millisecond))
	ctr := b("from", tag)
	t.Cleanup(func() {
		// The storage directory goes with the test; unmount first so that it can.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		global := []string{"--root", filepath.Join(store, "root"), "--runroot", filepath.Join(store, "run"), "--storage-driver", "vfs"}
		_ = exec.CommandContext(ctx, buildah, append(global, "rm", ctr)...).Run()
		_ = exec.CommandContext(ctx, buildah, append(global, "rmi", "--all", "--force")...).Run()
	})
	mnt := b("mount", ctr)

	// The image's binary runs, and says what it is.
	taskd := filepath.Join(mnt, "taskd")
	out := run(t, ctx, t.TempDir(), taskd, nil, "version", "-json")
	var v struct{ Module, Version, Go string }
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("the image's taskd version -json: %v\n%s", err, out)
	}
	want := strings.TrimSpace(run(t, ctx, t.TempDir(), bin, nil, "version", "-json"))
	if v.Module != "github.com/taskd/taskd" || v.Version == "" || v.Go == "" || strings.TrimSpace(out) != want {
		t.Errorf("the image's taskd version -json = %s, want %s (module github.com/taskd/taskd)", out, want)
	}
	if human := run(t, ctx, t.TempDir(), taskd, nil, "version"); !strings.HasPrefix(human, "taskd "+v.Version+"\n") {
		t.Errorf("the image's taskd version:\n%s\nwant it to start with %q", human, "taskd "+v.Version)
	}

	// Static: no program interpreter (dynamic loader) to find in an empty image.
	f, err := elf.Open(taskd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the image's /taskd has a program interpreter (PT_INTERP): it is not static, and an image FROM scratch has no loader")
		}
	}
	if fi, err := os.Stat(filepath.Join(mnt, "etc", "ssl", "certs", "ca-certificates.crt")); err != nil || fi.Size() == 0 {
		t.Errorf("the image has no CA bundle at /etc/ssl/certs/ca-certificates.crt (TLS to the stores and the collector): %v", err)
	}
	entries, err := os.ReadDir(mnt)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"etc", "taskd"}) {
		t.Errorf("the image's root holds %v, want [etc taskd] (FROM scratch: the binary and the CA bundle)", names)
	}

	// The image's configuration.
	var img struct {
		OCIv1 struct {
			Config struct {
				User         string
				Entrypoint   []string
				Cmd          []string
				WorkingDir   string
				ExposedPorts map[string]struct{}
			} `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(b("inspect", "--type", "image", tag)), &img); err != nil {
		t.Fatal(err)
	}
	c := img.OCIv1.Config
	if !slices.Equal(c.Entrypoint, []string{"/taskd"}) {
		t.Errorf("entrypoint %q, want [/taskd]", c.Entrypoint)
	}
	if !slices.Equal(c.Cmd, []string{"serve"}) {
		t.Errorf("cmd %q, want [serve]", c.Cmd)
	}
	uid, _, _ := strings.Cut(c.User, ":")
	var n int
	if _, err := fmt.Sscanf(uid, "%d", &n); err != nil || n == 0 || fmt.Sprint(n) != uid {
		t.Errorf("user %q, want a numeric user that is not root (Kubernetes' runAsNonRoot needs a number)", c.User)
	}
	if c.WorkingDir != "/etc/taskd" {
		t.Errorf("working directory %q, want /etc/taskd, where config.yaml is mounted", c.WorkingDir)
	}
	for _, port := range []string{"8080/tcp", "9464/tcp"} {
		if _, ok := c.ExposedPorts[port]; !ok {
			t.Errorf("exposed ports %v lack %s", c.ExposedPorts, port)
		}
	}

	t.Run("serves with the Kubernetes configuration", func(t *testing.T) {
		serveFromImage(t, ctx, taskd)
	})
}

// serveFromImage runs the image's binary as deploy/kubernetes runs it, with
// its ConfigMap's config.yaml and the secrets as variables: taskd migrate (the
// init container), then taskd serve and taskd work, until their probes'
// endpoints answer 200; then SIGTERM, and each must exit 0.
func serveFromImage(t *testing.T, ctx context.Context, taskd string) {
	redisURL := testenv.Lookup(t, testenv.RedisURLVar)
	dsn := storetest.NewEmptyDatabase(t)
	b, err := os.ReadFile(filepath.Join("..", "kubernetes", "configmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	if err := yaml.Unmarshal(b, &cm); err != nil || cm.Data["config.yaml"] == "" {
		t.Fatalf("deploy/kubernetes/configmap.yaml: no data config.yaml (%v)", err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKD_") && !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	redisAddr := strings.TrimPrefix(redisURL, "redis://")
	redisAddr, _, _ = strings.Cut(redisAddr, "/")
	httpAddr, metricsAddr := freeAddr(t), freeAddr(t)
	env = append(env,
		// What the Secret gives, and the addresses of the test's servers.
		"TASKD_MYSQL_DSN="+dsn,
		"TASKD_ADMIN_TOKEN="+rand.Text()+rand.Text(),
		"TASKD_REDIS_ADDRS="+redisAddr,
		"TASKD_REDIS_KEY_PREFIX=image:"+strings.ToLower(rand.Text()[:10])+":",
		"TASKD_HTTP_ADDR="+httpAddr,
		"TASKD_WORKER_METRICS_ADDR="+metricsAddr,
	)
	command := func(args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, taskd, args...)
		cmd.Dir, cmd.Env = dir, env // ./config.yaml, as in the image's working directory
		return cmd
	}
	if out, err := command("migrate").CombinedOutput(); err != nil {
		t.Fatalf("the image's taskd migrate: %v\n%s", err, out)
	}
	for _, p := range []struct {
		cmd, addr string
		paths     []string
	}{
		{"serve", httpAddr, []string{"/healthz", "/readyz"}}, // deployment-serve.yaml's probes
		{"work", metricsAddr, []string{"/healthz"}},          // deployment-work.yaml's
	} {
		cmd := command(p.cmd)
		var errOut testenv.LockedBuffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for _, path := range p.paths {
			url := "http://" + p.addr + path
			ok := false
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && !ok; time.Sleep(100 * time.Millisecond) {
				resp, err := http.Get(url)
				if err == nil {
					ok = resp.StatusCode == http.StatusOK
					resp.Body.Close()
				}
			}
			if !ok {
				t.Errorf("the image's taskd %s: GET %s did not answer 200 within a minute", p.cmd, url)
			}
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the image's taskd %s on SIGTERM: %v", p.cmd, err)
			}
		case <-time.After(time.Minute):
			_ = cmd.Process.Kill()
			t.Errorf("the image's taskd %s did not exit within a minute of SIGTERM", p.cmd)
			<-done
		}
		if t.Failed() {
			t.Logf("taskd %s stderr:\n%s", p.cmd, errOut.String())
		}
	}
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
