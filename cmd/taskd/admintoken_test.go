package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestCheckAdminToken(t *testing.T) {
	t.Parallel()
	// The token config.yaml ships is refused, read from the file itself.
	b, err := os.ReadFile("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var shipped struct {
		AdminToken string `yaml:"admin_token"`
	}
	if err := yaml.Unmarshal(b, &shipped); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, token, want string
	}{
		{"shipped in config.yaml", shipped.AdminToken, "is the example token shipped with taskd"},
		{"short", "0123456789abcdef0123456789abcde", "must be at least 32 characters to serve, got 31"},
		{"multibyte counts characters", strings.Repeat("é", 31), "got 31"},
	} {
		err := checkAdminToken(tc.token)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "openssl rand -base64 32") {
			t.Errorf("%s: %v, want %q and how to make a token", tc.name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), tc.token) {
			t.Errorf("%s: the error quotes the token: %v", tc.name, err)
		}
	}
	if err := checkAdminToken("0123456789abcdef0123456789abcdef"); err != nil {
		t.Errorf("32 characters: %v", err)
	}
}

// TestE2EWeakAdminToken: serve refuses the admin token config.yaml ships, and
// a short one, naming the key, where it came from and how to make one; dev
// serves with config.yaml's.
func TestE2EWeakAdminToken(t *testing.T) {
	t.Parallel()
	repoConfig, err := filepath.Abs("../../config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, stderr, code := run(t, nil, "serve", "-config", repoConfig)
	for _, want := range []string{
		"config: admin_token: is the example token shipped with taskd",
		"openssl rand -base64 32", "TASKD_ADMIN_TOKEN", "(from config.yaml line ",
	} {
		if code != exitUsage || !strings.Contains(stderr, want) {
			t.Errorf("serve with config.yaml's token: exit %d, want %d and %q in stderr:\n%s", code, exitUsage, want, stderr)
		}
	}
	_, stderr, code = run(t, []string{"TASKD_MYSQL_DSN=u:p@tcp(127.0.0.1:1)/d", "TASKD_ADMIN_TOKEN=twenty-characters-xx"}, "serve")
	if want := "config: admin_token: must be at least 32 characters to serve, got 20; make one with `openssl rand -base64 32`"; code != exitUsage || !strings.Contains(stderr, want) || !strings.Contains(stderr, "(from TASKD_ADMIN_TOKEN)") {
		t.Errorf("serve with a short token: exit %d, want %d and %q (from TASKD_ADMIN_TOKEN) in stderr:\n%s", code, exitUsage, want, stderr)
	}
	if strings.Contains(stderr, "twenty-characters-xx") {
		t.Errorf("the error quotes the token:\n%s", stderr)
	}

	// dev takes it: the local playground runs with config.yaml as it is.
	var env []string
	for _, kv := range servicesEnv(t) {
		if !strings.HasPrefix(kv, "TASKD_ADMIN_TOKEN=") {
			env = append(env, kv)
		}
	}
	p := start(t, append(env, "TASKD_HTTP_ADDR=127.0.0.1:0", "TASKD_LOG_FORMAT=json"), "dev", "-config", repoConfig, "-articles", "0")
	addr, _ := p.waitLog("serving", 60*time.Second)["addr"].(string)
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/stats", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer dev-admin-token-change-me")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("dev: GET /v1/stats with config.yaml's token: %d, want 200", resp.StatusCode)
	}
	if code := p.stop(syscall.SIGTERM, 30*time.Second); code != 0 {
		t.Errorf("dev exited %d on SIGTERM", code)
	}
}
