package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/taskd/taskd/internal/config"
)

// cmdFlags is a command's flag set with its help text.
type cmdFlags struct {
	*flag.FlagSet
	name     string
	synopsis string
	about    string
	config   *string
}

// newFlags returns the flag set of command name, with the -config flag every
// command has. synopsis is the usage line after "taskd", about a paragraph or
// more of help.
func (a *app) newFlags(name, synopsis, about string) *cmdFlags {
	fs := flag.NewFlagSet("taskd "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parse errors are reported by exitStatus
	f := &cmdFlags{FlagSet: fs, name: name, synopsis: synopsis, about: about}
	f.config = fs.String("config", "", "configuration `file` (default: $"+config.FileEnv+", else ./"+config.DefaultFile+" when it exists)")
	return f
}

// parse parses args. On -h or -help (or --help) it prints the help on stdout and returns
// errHelp; a bad flag is a usageError.
func (a *app) parse(f *cmdFlags, args []string) error {
	err := f.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		f.printHelp(a.stdout)
		return errHelp
	}
	if err != nil {
		return usagef(f.name, "%v", err)
	}
	return nil
}

// noArgs fails with a usageError when positional arguments were given.
func noArgs(f *cmdFlags) error {
	if f.NArg() > 0 {
		return usagef(f.name, "unexpected argument %q", f.Arg(0))
	}
	return nil
}

func (f *cmdFlags) printHelp(w io.Writer) {
	fmt.Fprintf(w, "Usage: taskd %s\n\n%s\n\nFlags:\n", f.synopsis, strings.TrimSpace(f.about))
	f.SetOutput(w)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
}

// loadConfig loads the configuration: the file given with -config, else the one
// in $TASKD_CONFIG, else ./config.yaml when it exists, else none; then the
// environment. Errors are usageErrors (exit status 2) naming the key.
func (a *app) loadConfig(f *cmdFlags) (*config.Config, error) {
	path := config.Path(*f.config, a.env)
	a.warnUnknownEnv(f.name) // first: a misspelt name may be why Load fails
	cfg, err := config.Load(path, a.env)
	if err != nil {
		return nil, &usageError{err: err}
	}
	return cfg, nil
}

// warnUnknownEnv warns about TASKD_ variables that set nothing, such as a
// misspelt key, which would otherwise be ignored without a word. The test
// harness's own variables (TASKD_TEST_*, TASKD_SERVICES_*) are left alone.
func (a *app) warnUnknownEnv(cmd string) {
	if a.environ == nil {
		return
	}
	known := map[string]bool{config.FileEnv: true}
	for _, k := range config.Keys() {
		known[k.Env] = true
		if k.Alias != "" {
			known[k.Alias] = true
		}
	}
	for _, kv := range a.environ() {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, config.EnvPrefix) || known[name] ||
			strings.HasPrefix(name, "TASKD_TEST_") || strings.HasPrefix(name, "TASKD_SERVICES_") {
			continue
		}
		fmt.Fprintf(a.stderr, "taskd %s: warning: %s is not a taskd setting; ignored\n", cmd, name)
	}
}
