package taskd_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

	"github.com/taskd/taskd/internal/testenv"
)

// notRunMarker, alone on the line before a ```sh fence, keeps that block
// from being run by TestDocsShellExamplesRun; the reason follows the colon.
var notRunMarker = regexp.MustCompile(`^<!-- not run by docs_examples_test\.go: (.+\S) -->$`)

// maxNotRun is how many shell blocks of the docs may be marked not run.
const maxNotRun = 3

// shellBlock is a ```sh block of a Markdown file.
type shellBlock struct {
	where  string // file:line of the fence
	text   string
	notRun string // the marker's reason, or ""
}

// docsShellBlocks returns the ```sh blocks of README.md and docs/*.md, in
// that order (README.md, then docs/ by name), each block in file order.
func docsShellBlocks(t *testing.T) []shellBlock {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []shellBlock
	for _, name := range append([]string{"README.md"}, pages...) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		for i := 0; i < len(lines); i++ {
			fence := strings.TrimSpace(lines[i])
			if !strings.HasPrefix(fence, "```") {
				continue
			}
			end := i + 1
			for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
				end++
			}
			switch strings.TrimPrefix(fence, "```") {
			case "sh", "bash", "shell", "console":
				blk := shellBlock{where: fmt.Sprintf("%s:%d", name, i+1), text: strings.Join(lines[i+1:end], "\n") + "\n"}
				if i > 0 {
					if m := notRunMarker.FindStringSubmatch(lines[i-1]); m != nil {
						blk.notRun = m[1]
					}
				}
				blocks = append(blocks, blk)
			}
			i = end
		}
	}
	return blocks
}

// shownOutput returns the keys, in order, of the JSON a block shows as its
// output: its comment lines that hold `{"` and the lines that go on from them
// (`#  "…`).
func shownOutput(block string) []string {
	var keys []string
	shown := false
	for _, line := range strings.Split(block, "\n") {
		c, ok := strings.CutPrefix(strings.TrimSpace(line), "#")
		switch {
		case ok && strings.Contains(c, `{"`), ok && shown && strings.HasPrefix(c, `  "`):
			shown = true
			for _, m := range jsonKey.FindAllStringSubmatch(c, -1) {
				keys = append(keys, m[1])
			}
		default:
			shown = false
		}
	}
	return keys
}

// jsonKey is a key of a JSON object.
var jsonKey = regexp.MustCompile(`"([A-Za-z0-9_]+)":`)

// missingKeys returns the first of keys that out does not name in that order
// (as a subsequence of its JSON keys), with its index, or -1 when out has them all.
func missingKeys(out string, keys []string) (int, string) {
	got := jsonKey.FindAllStringSubmatch(out, -1)
	j := 0
	for i, k := range keys {
		for j < len(got) && got[j][1] != k {
			j++
		}
		if j == len(got) {
			return i, k
		}
		j++
	}
	return -1, ""
}

// TestDocsShellBlocks holds the shell examples of README.md and docs/ to what
// TestDocsShellExamplesRun needs: the tour's names, and few blocks marked not
// run, each with its reason.
func TestDocsShellBlocks(t *testing.T) {
	t.Parallel()
	blocks := docsShellBlocks(t)
	if len(blocks) < 8 {
		t.Fatalf("found %d shell blocks in README.md and docs/; the fences are no longer found", len(blocks))
	}
	notRun := 0
	for _, b := range blocks {
		if b.notRun != "" {
			notRun++
			continue
		}
		for _, old := range []string{"$ADMIN ", "$ADMIN\"", "localhost:8080", "127.0.0.1:8080"} {
			if strings.Contains(dropTourExports(b.text), old) {
				t.Errorf("%s: uses %q: examples use the tour's $TASKD and $ADMIN_TOKEN", b.where, old)
			}
		}
	}
	if notRun > maxNotRun {
		t.Errorf("%d shell blocks are marked not run, want at most %d: make the examples runnable", notRun, maxNotRun)
	}
	t.Logf("%d shell blocks, %d marked not run", len(blocks), notRun)
}

// TestShownOutput holds the check of a block's shown output to made-up text.
func TestShownOutput(t *testing.T) {
	t.Parallel()
	block := "A=$(curl x); echo \"$A\"\n# {\"task\":{\"id\":42,…},\n#  \"fence\":1}\n# a comment {x}\ncurl y\n#  \"not\": 1\n# {\"ids\":[1]} 201\n"
	keys := shownOutput(block)
	if want := []string{"task", "id", "fence", "ids"}; strings.Join(keys, ",") != strings.Join(want, ",") {
		t.Fatalf("shownOutput = %v, want %v", keys, want)
	}
	if i, k := missingKeys(`{"task":{"id":7,"title":"t"},"fence":3}{"ids":[7]}`, keys); i != -1 {
		t.Errorf("missingKeys: %q missing from the matching output", k)
	}
	if i, k := missingKeys(`{"fence":3,"task":{"id":7}}{"ids":[7]}`, keys); i != 2 || k != "fence" {
		t.Errorf("missingKeys of keys out of order = %d %q, want 2 fence", i, k)
	}
	if i, _ := missingKeys("", keys); i != 0 {
		t.Errorf("missingKeys of nothing = %d, want 0", i)
	}
}

// TestDocsShellExamplesRun runs every ```sh block of README.md and docs/ that
// is not marked not run, in order, each with bash -eu -o pipefail in a
// directory of its own beside a `taskd dev` as `make run` starts it: with
// config.yaml, its example categories uncommented (news with stages edit and
// review), in a database of its own on the test MariaDB, `taskd` on PATH and
// at bin/taskd, and TASKD, EDITOR_TOKEN and ADMIN_TOKEN set as the tour that
// `taskd dev` prints them (the README's tour is that tour, set as
// TestReadmeTourIsTheDevTour checks, so its export lines are not run). curl
// gets --fail-with-body from a .curlrc, so that an HTTP error fails the block.
// Each block must exit 0 within a minute, and print the JSON keys its comments
// show as output, in that order.
func TestDocsShellExamplesRun(t *testing.T) {
	t.Parallel()
	serverDSN := testenv.Lookup(t, testenv.MySQLDSNVar)
	redisURL := testenv.Lookup(t, testenv.RedisURLVar)
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the examples need %s: %v (scripts/services.sh installs it)", tool, err)
		}
	}
	blocks := docsShellBlocks(t)

	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "taskd")
	if out, err := exec.Command("go", "build", "-o", bin, "./cmd/taskd").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	config, err := os.ReadFile("config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), withExampleCategories(t, string(config)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".curlrc"), []byte("--fail-with-body\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TASKD_") && !strings.HasPrefix(kv, "OTEL_") &&
			!strings.HasPrefix(kv, "PATH=") && !strings.HasPrefix(kv, "CURL_HOME=") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"CURL_HOME="+dir,
		"TASKD_MYSQL_DSN="+docsDatabase(t, serverDSN),
		"TASKD_REDIS_ADDRS="+opt.Addr,
		"TASKD_REDIS_DB="+fmt.Sprint(opt.DB),
		"TASKD_REDIS_KEY_PREFIX="+testenv.Prefix(t),
		"TASKD_HTTP_ADDR=127.0.0.1:0",
	)

	tour := startDev(t, dir, env)
	env = append(env, "TASKD="+tour["TASKD"], "EDITOR_TOKEN="+tour["EDITOR_TOKEN"], "ADMIN_TOKEN="+tour["ADMIN_TOKEN"])

	// The harness fails a block on an HTTP error, and on a variable the
	// environment does not set (ADMIN, say, for ADMIN_TOKEN).
	for _, bad := range []string{`curl -sS "$TASKD/v1/no-such-route"`, `curl -sS "$TASKD/v1/stats" -H "Authorization: Bearer $ADMIN"`} {
		cmd := exec.Command("bash", "--noprofile", "--norc", "-eu", "-o", "pipefail", "-c", bad)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err == nil {
			t.Fatalf("%s exited 0 in the examples' environment:\n%s", bad, out)
		}
	}

	ran, notRun := 0, 0
	for i, b := range blocks {
		if b.notRun != "" {
			notRun++
			t.Logf("%s: not run: %s", b.where, b.notRun)
			continue
		}
		script := dropTourExports(b.text)
		work := filepath.Join(dir, fmt.Sprintf("block%d", i))
		if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(bin, filepath.Join(work, "bin", "taskd")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(dir, "config.yaml"), filepath.Join(work, "config.yaml")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-eu", "-o", "pipefail", "-c", script)
		cmd.Dir, cmd.Env = work, env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		cancel()
		if err != nil {
			t.Errorf("%s: %v\n--- the block\n%s--- stdout\n%s--- stderr\n%s", b.where, err, script, stdout.String(), stderr.String())
			continue
		}
		if keys := shownOutput(b.text); len(keys) > 0 {
			if at, k := missingKeys(stdout.String(), keys); at >= 0 {
				t.Errorf("%s: its output shows the keys %v, but what it printed lacks %q (key %d) in that order:\n%s", b.where, keys, k, at+1, stdout.String())
			}
		}
		ran++
	}
	t.Logf("ran %d shell blocks, %d marked not run", ran, notRun)
	if ran < 6 {
		t.Errorf("ran %d shell blocks, want the tour, the API's and the operations' examples", ran)
	}
}

// tourExport is one of the tour's export lines, which the test's environment sets.
var tourExport = regexp.MustCompile(`(?m)^export (TASKD|EDITOR_TOKEN|ADMIN_TOKEN)=(\S*).*\n`)

// dropTourExports removes the tour's export lines from a block.
func dropTourExports(block string) string {
	return tourExport.ReplaceAllString(block, "")
}

// withExampleCategories returns config.yaml with its example `categories:`
// uncommented.
func withExampleCategories(t *testing.T, config string) []byte {
	t.Helper()
	lines := strings.Split(config, "\n")
	found := false
	for i, line := range lines {
		if line != "categories: []" {
			continue
		}
		found = true
		lines[i] = "categories:"
		for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "#  "); j++ {
			lines[j] = lines[j][1:]
		}
	}
	if !found || !strings.Contains(strings.Join(lines, "\n"), "\n  - name: news\n    stages: [edit, review]\n") {
		t.Fatal("config.yaml has no example categories: [] followed by a news category with stages edit and review, commented out")
	}
	return []byte(strings.Join(lines, "\n"))
}

// docsDatabase creates an empty database for the examples on the server of
// serverDSN, dropped when the test ends, and returns its DSN.
func docsDatabase(t *testing.T, serverDSN string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	name := "taskd_docs_" + strings.ToLower(rand.Text()[:10])
	cfg.DBName = ""
	root, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = root.Close() })
	if _, err := root.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := root.Exec("DROP DATABASE " + name); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	cfg.DBName = name
	return cfg.FormatDSN()
}

// startDev runs `taskd dev` in dir with env, as `make run` does but with 200
// articles, and returns the values of the tour it prints once it serves. It
// stops when the test ends (SIGTERM, SIGKILL after 30 s), and its output is
// shown if the test failed.
func startDev(t *testing.T, dir string, env []string) map[string]string {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "bin", "taskd"), "dev", "-articles", "200")
	cmd.Dir, cmd.Env = dir, env
	stderr := &testenv.LockedBuffer{}
	cmd.Stderr = stderr
	stdout, pw := io.Pipe()
	cmd.Stdout = pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start taskd dev: %v", err)
	}
	done := make(chan struct{})
	tour := make(chan map[string]string, 1)
	var printed testenv.LockedBuffer
	go func() {
		values := map[string]string{}
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = printed.Write(append(sc.Bytes(), '\n'))
			if m := tourExport.FindStringSubmatch(sc.Text() + "\n"); m != nil {
				values[m[1]] = m[2]
				if len(values) == 3 {
					tour <- values
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); _ = pw.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("taskd dev printed:\n%s\nand logged:\n%s", printed.String(), stderr.String())
		}
	})
	select {
	case v := <-tour:
		return v
	case <-done:
		t.Fatalf("taskd dev exited before it printed its tour:\n%s\n%s", printed.String(), stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("taskd dev printed no tour within 2 minutes:\n%s", printed.String())
	}
	return nil
}
