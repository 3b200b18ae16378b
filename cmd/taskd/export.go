package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/taskd/taskd/cmd/taskd/internal/exportfile"
	"github.com/taskd/taskd/cmd/taskd/internal/progress"
	"github.com/taskd/taskd/tasks"
)

// runExport writes the accepted results to a file or standard output.
func runExport(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("export", "export [flags]", `
Writes the accepted results, oldest first, as JSON lines (one object per
result: cursor, task_id, fence, category, title, key, holder, editor_id,
result, submitted_at) or CSV (a header row with those columns, the result as
JSON text), to -o FILE or standard output. The format comes from -format,
else from FILE's extension (.jsonl, .ndjson, .json, .csv), else JSON lines.

A task with stages has one result per stage submitted; a task that asks for
several results (overlap), one per editor. Their JSON lines go on with
stage (the stage the result was submitted at), decision, notes, group_id and
overlap, each only when set; and active_ms, the active time of the claim that
submitted it, when it was measured (see docs/working-time.md). With -workflow, CSV has those five columns too,
after the others, empty when not set. A CSV cell that a spreadsheet would
take for a formula (starting with =, +, -, @, a tab or a carriage return,
and not a plain number) is written with a single quote before it.

It reads MySQL directly, like import, through the same results feed as
GET /v1/results: no server needs to run, and a reader that follows the
cursor gets every result exactly once, even while editors submit. It stops
when it has caught up with the results committed by then.

Every result has a cursor. When the export ends, or is interrupted by
SIGINT or SIGTERM, it flushes what it wrote and prints on stderr the last
cursor it wrote. To go on from there:

  taskd export -o FILE -append     appends to FILE after its last result:
                                   the cursor is read from the file itself,
                                   and a record cut short by a killed export
                                   is cut off first. No result is repeated.
  taskd export -after CURSOR       starts after CURSOR (any output).

Without -append, an existing FILE that is not empty is refused. Reads MySQL
only, but needs Redis to answer too.`)
	format := f.String("format", "", "output `format`: jsonl or csv (default: from -o's extension, else jsonl)")
	out := f.String("o", "", "write to `file` (default: standard output)")
	after := f.Int64("after", 0, "export the results after this `cursor` (default: from the start, or with -append from the end of the file)")
	appendTo := f.Bool("append", false, "append to the -o file, after the last result it holds")
	batch := f.Int("batch", tasks.ResultsLimitDefault, fmt.Sprintf("results per read, 1..%d", tasks.ResultsLimitMax))
	workflow := f.Bool("workflow", false, "CSV: add the columns stage, decision, notes, group_id and overlap (with -append, as the file has them)")
	if err := a.parse(f, args); err != nil {
		return err
	}
	if err := noArgs(f); err != nil {
		return err
	}
	afterSet := false
	f.Visit(func(fl *flag.Flag) { afterSet = afterSet || fl.Name == "after" })
	ff, err := exportfile.DetectFormat(*format, *out)
	switch {
	case err != nil:
		return usagef("export", "%v", err)
	case *batch < 1 || *batch > tasks.ResultsLimitMax:
		return usagef("export", "-batch must be 1..%d, got %d", tasks.ResultsLimitMax, *batch)
	case *after < 0:
		return usagef("export", "-after must be a cursor (0 or more), got %d", *after)
	case *appendTo && *out == "":
		return usagef("export", "-append needs -o FILE")
	}
	cfg, err := a.loadConfig(f)
	if err != nil {
		return err
	}

	ex := &exporter{a: a, format: ff, batch: *batch, path: *out, after: *after, w: a.stdout, workflow: *workflow}
	if *format != "" {
		ex.formatFlag = " -format " + string(ff)
	}
	if *out != "" {
		file, start, header, workflowFile, err := openExportFile(*out, ff, *appendTo, afterSet, *after, *workflow)
		if err != nil {
			return err
		}
		defer file.Close()
		ex.w, ex.file, ex.after, ex.header, ex.workflow = file, file, start, header, workflowFile
	}
	e, err := a.toolEngine(cfg)
	if err != nil {
		return err
	}
	defer stopTool(e)
	ex.results = e
	return ex.run(ctx)
}

// openExportFile opens path for an export: a new or empty file, or with
// appendTo the end of an export file, after its last whole record. It returns
// the cursor to export after, whether a CSV header is to be written, and
// whether CSV rows have the workflow's columns: as workflow asks, or as the
// file to append to has them (workflow is refused for a file without them).
func openExportFile(path string, f exportfile.Format, appendTo, afterSet bool, after int64, workflow bool) (
	file *os.File, start int64, header, workflowRows bool, err error,
) {
	file, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, 0, false, false, err
	}
	fail := func(err error) (*os.File, int64, bool, bool, error) {
		_ = file.Close()
		return nil, 0, false, false, err
	}
	if !appendTo {
		fi, err := file.Stat()
		if err != nil {
			return fail(err)
		}
		if fi.Size() > 0 {
			return fail(usagef("export", "%s exists and is not empty: pass -append to add to it after its last result, or choose another file", path))
		}
		return file, after, f == exportfile.CSV, workflow, nil
	}
	end, err := exportfile.Resume(file, f)
	if err != nil {
		return fail(fmt.Errorf("%s: %w; -append adds only to a file taskd export wrote, in the same format", path, err))
	}
	if afterSet && end.Records > 0 && after != end.Cursor {
		return fail(usagef("export", "%s ends with cursor %d, so -after %d would skip or repeat results: leave -after out to go on after %d",
			path, end.Cursor, after, end.Cursor))
	}
	if end.Records == 0 && afterSet {
		end.Cursor = after
	}
	if end.Header {
		if workflow && !end.Workflow {
			return fail(usagef("export", "%s has no workflow columns, so -workflow would add cells its header does not name: leave -workflow out, or export to another file", path))
		}
		workflow = end.Workflow
	}
	// Cut off a record cut short by an export that was killed while writing it.
	if err := file.Truncate(end.Size); err != nil {
		return fail(err)
	}
	if _, err := file.Seek(end.Size, io.SeekStart); err != nil {
		return fail(err)
	}
	return file, end.Cursor, f == exportfile.CSV && !end.Header, workflow, nil
}

// resultsReader reads the accepted results; *taskd.Engine implements it.
type resultsReader interface {
	CountResults(ctx context.Context, after int64) (int64, error)
	Results(ctx context.Context, p tasks.ResultsParams, fn func(*tasks.Result) error) (tasks.ResultsPage, error)
}

// exporter runs one export.
type exporter struct {
	a       *app
	results resultsReader
	format  exportfile.Format
	batch   int
	path    string    // "" for standard output
	w       io.Writer // the file or standard output
	file    *os.File  // nil for standard output
	after   int64
	header  bool
	// workflow: CSV rows have the workflow's columns.
	workflow bool
	// formatFlag is " -format F" when the format was given, for the resume hint.
	formatFlag string
}

func (ex *exporter) run(ctx context.Context) error {
	total, err := ex.results.CountResults(ctx, ex.after)
	if err != nil {
		return err
	}
	bar := progress.New(ex.a.stderr, "exporting", "results", total)
	w := exportfile.NewWriter(ex.w, ex.format, ex.header)
	if ex.workflow {
		w.WithWorkflow()
	}
	cursor, written := ex.after, 0 // the last record flushed, and the count
	var readErr error
	for {
		last, n := cursor, 0
		page, err := ex.results.Results(ctx, tasks.ResultsParams{After: cursor, Limit: ex.batch}, func(r *tasks.Result) error {
			if err := w.Write(r); err != nil {
				return err
			}
			last, n = r.Cursor, n+1
			bar.Add(1)
			return nil
		})
		// Every record handed to w is whole: flush them, whatever err says.
		if ferr := w.Flush(); ferr != nil {
			bar.Finish()
			return fmt.Errorf("write %s: %w (the last result surely written has cursor %d; -append resumes from the file itself)",
				ex.name(), ferr, cursor)
		}
		cursor, written = last, written+n
		if err != nil {
			readErr = err
			break
		}
		if !page.More {
			break
		}
	}
	bar.Finish()
	if ex.file != nil {
		if err := ex.file.Sync(); err != nil {
			return fmt.Errorf("write %s: %w", ex.name(), err)
		}
	}
	resume := "-after " + strconv.FormatInt(cursor, 10)
	if ex.file != nil {
		resume = "-o " + ex.path + ex.formatFlag + " -append"
	}
	var expired *tasks.CursorExpiredError
	switch {
	case readErr != nil && ctx.Err() != nil:
		return fmt.Errorf("interrupted: wrote %s to %s; last cursor %d (resume with: taskd export %s)",
			plural(written, "result"), ex.name(), cursor, resume)
	case readErr != nil && errors.As(readErr, &expired):
		return fmt.Errorf("results after cursor %d are older than what retention kept (retention.done): those up to cursor %d may have been purged "+
			"and cannot be exported; wrote %s to %s. To export what is kept, skipping them: taskd export -after %d",
			expired.Cursor, expired.Oldest, plural(written, "result"), ex.name(), expired.Oldest)
	case readErr != nil && errors.Is(readErr, tasks.ErrInvalid):
		return &usageError{err: fmt.Errorf("-after %d: %w", ex.after, readErr)}
	case readErr != nil:
		return fmt.Errorf("%w; wrote %s to %s; last cursor %d (resume with: taskd export %s)",
			readErr, plural(written, "result"), ex.name(), cursor, resume)
	}
	fmt.Fprintf(ex.a.stderr, "exported %s to %s; last cursor %d (resume with: taskd export %s)\n",
		plural(written, "result"), ex.name(), cursor, resume)
	return nil
}

// name names the output in messages.
func (ex *exporter) name() string {
	if ex.file == nil {
		return "standard output"
	}
	return ex.path
}
