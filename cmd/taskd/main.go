// Command taskd hands work out to exactly one holder at a time: a pool of tasks in
// MySQL, claimed through per-task Redis locks and fenced MySQL updates, served to
// editors over HTTP and to worker processes running Go handlers.
//
// Usage:
//
//	taskd <command> [flags]
//
// The commands:
//
//	serve    the HTTP API, the workspace at / and the console at /ops, sweeps,
//	         webhook delivery and periodic tasks (workers too, with worker.in_serve)
//	work     a worker process running the built-in Go handlers
//	migrate  applies the schema's migrations the database lacks (-status: report only)
//	import   bulk-loads tasks from JSON lines or CSV
//	export   writes the accepted results to JSON lines or CSV, resumably
//	status   the pool: counts by status and category, holders, expiring claims
//	pause, resume
//	         stop and start handing out one category's tasks
//	cancel   ends a task for good, pending or running (its claim ends with it)
//	dev      migrate, demo editors and articles, then serve (what `make run` runs)
//	version  the module version and git revision this binary was built from
//
// `taskd <command> -help` describes each and its flags. Configuration comes from
// config.yaml (a complete, commented example sits at the top of the repository)
// and TASKD_* environment variables; the repository's docs/operations.md covers
// running taskd, and docs/deployment.md laying it out.
//
// Exit status: 0 on success, 1 when something failed at run time (a store is
// unreachable, rows were rejected), 2 for a usage or configuration error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, a *app, args []string) error
}

// commands returns the command table, in the order `taskd -help` lists it.
func commands() []command {
	return []command{
		{"serve", "run the HTTP API and the sweeper (and workers, with worker.in_serve)", runServe},
		{"work", "run a worker process that executes tasks with the registered handlers", runWork},
		{"migrate", "create or update the database schema (safe to repeat)", runMigrate},
		{"import", "bulk-load tasks from a JSON lines or CSV file", runImport},
		{"export", "write the accepted results to JSON lines or CSV, resumable", runExport},
		{"status", "show the pool: counts by status and category, live claims", runStatus},
		{"pause", "stop handing out the tasks of a category (live claims finish)", runPause},
		{"resume", "hand out the tasks of a paused category again", runResume},
		{"cancel", "cancel a task for good, pending or running (its holder is stopped)", runCancel},
		{"dev", "migrate, load demo editors and articles, print curl commands, then serve", runDev},
		{"version", "print the version and git revision of this binary (also: taskd -version)", runVersion},
	}
}

// app is what every command gets from the process: its output streams and
// environment.
type app struct {
	stdout io.Writer
	stderr io.Writer
	env    func(string) (string, bool)
	// environ lists the environment as KEY=value, for the check of unknown
	// TASKD_ variables; nil skips the check.
	environ func() []string
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first signal, a second one kills the process at once.
		<-ctx.Done()
		stop()
	}()
	a := &app{stdout: os.Stdout, stderr: os.Stderr, env: os.LookupEnv, environ: os.Environ}
	os.Exit(a.main(ctx, os.Args[1:]))
}

// main runs the command named by args[0] and returns the exit status.
func (a *app) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "-h", "-help", "--help", "help":
		if len(rest) > 0 && name == "help" {
			return a.main(ctx, []string{rest[0], "-help"})
		}
		a.usage(a.stdout)
		return exitOK
	case "-version", "--version":
		return a.main(ctx, append([]string{"version"}, rest...))
	}
	for _, c := range commands() {
		if c.name == name {
			return a.exitStatus(name, c.run(ctx, a, rest))
		}
	}
	fmt.Fprintf(a.stderr, "taskd: unknown command %q\n\n", name)
	a.usage(a.stderr)
	return exitUsage
}

// exitStatus reports err on stderr and maps it to an exit status.
func (a *app) exitStatus(name string, err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return exitOK
	case errors.As(err, &ue):
		a.report(name, ue.err)
		if ue.hint != "" {
			fmt.Fprintln(a.stderr, ue.hint)
		}
		return exitUsage
	default:
		a.report(name, err)
		return exitFailure
	}
}

// report prints err on stderr, each line (errors.Join makes several) prefixed
// with the command.
func (a *app) report(name string, err error) {
	for line := range strings.Lines(err.Error()) {
		fmt.Fprintf(a.stderr, "taskd %s: %s\n", name, strings.TrimRight(line, "\n"))
	}
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, `taskd hands tasks out to exactly one holder at a time.

Usage:
  taskd <command> [flags]

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'taskd <command> -help' for a command's flags.

Configuration: ./config.yaml when it exists, or the file given with -config or
TASKD_CONFIG; every key can be overridden by TASKD_<SECTION>_<KEY> (for example
TASKD_HTTP_ADDR, TASKD_MYSQL_DSN, TASKD_REDIS_ADDRS, TASKD_LEASE_TTL).

Exit status: 0 ok, 1 runtime failure, 2 usage or configuration error.
`)
}

// errHelp means the command printed its help as asked; the exit status is 0.
var errHelp = errors.New("help requested")

// usageError is a usage or configuration error: exit status 2.
type usageError struct {
	err  error
	hint string // printed after the error, e.g. "Run 'taskd import -help' for usage."
}

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// usagef returns a usageError for the command's flags.
func usagef(cmd, format string, args ...any) error {
	return &usageError{
		err:  fmt.Errorf(format, args...),
		hint: fmt.Sprintf("Run 'taskd %s -help' for usage.", cmd),
	}
}
