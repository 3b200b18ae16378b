package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/taskd/taskd/cmd/taskd/internal/importfile"
	"github.com/taskd/taskd/cmd/taskd/internal/progress"
	"github.com/taskd/taskd/tasks"
)

// Import limits.
const (
	importBatchDefault = 500
	importBatchMax     = 5000
	// importListDefault is how many rejected records the report lists.
	importListDefault = 50
)

// runImport bulk-loads tasks from a file.
func runImport(ctx context.Context, a *app, args []string) error {
	f := a.newFlags("import", "import [flags] FILE", `
Loads tasks from FILE into the pool: JSON lines (.jsonl, .ndjson, .json) with one
object per line, {"category", "title", "priority", "payload", "max_attempts",
"key", "run_after", "due_at", "stages", "overlap", "gold"}, or CSV (.csv) with a header
row naming those columns (category and title required, payload a JSON object,
run_after and due_at RFC 3339 times). -format overrides the extension.

stages are the task's own stages in order, e.g. ["edit", "review"] (in CSV,
edit,review or a JSON array), and [] one stage whatever its category says;
overlap is how many independent results the task asks for, 1..`+strconv.Itoa(tasks.MaxOverlap)+`, each
from a different editor (one task per result, counted here as one record).
Left out or empty, both are the category's, as config.yaml declares them.

gold, when given, is the task's known answer, {"decision": ...} and/or
{"result": {...}} (in CSV the same JSON object): the task is a gold task from
its insert on, and its category needs a gold rule in config.yaml that the
answer fits, or the batch is refused.

A record with a key whose task exists already is not imported again: give every
record a key, and running the same import twice imports nothing the second time
(the report says how many keys existed).

The whole file is checked first, with the store's own validation, and every
rejected record is reported with its line number and the reason. Then:

  - by default, a file with any rejected record imports nothing (exit status 1);
  - with -partial, the valid records are imported and the rejected ones listed
    (exit status 0).

Tasks are inserted in batches of -batch, each batch in one transaction. Should
the database fail midway, the batches committed so far stay, and the error says
how many tasks and up to which line. Each batch wakes the editors and workers
long-polling for its categories, on every taskd process that shares the Redis
of the configuration and its key prefix. Needs MySQL and Redis.`)
	format := f.String("format", "", "file `format`: jsonl or csv (default: from the extension)")
	batch := f.Int("batch", importBatchDefault, fmt.Sprintf("tasks per transaction, 1..%d", importBatchMax))
	partial := f.Bool("partial", false, "import the valid records even if some are rejected")
	dryRun := f.Bool("dry-run", false, "check the file and report, import nothing")
	list := f.Int("max-errors", importListDefault, "list at most `n` rejected records (all are counted)")
	if err := a.parse(f, args); err != nil {
		return err
	}
	if f.NArg() != 1 {
		return usagef("import", "want one FILE, got %d arguments", f.NArg())
	}
	path := f.Arg(0)
	ff, err := importfile.DetectFormat(*format, path)
	if err != nil {
		return usagef("import", "%v", err)
	}
	if *batch < 1 || *batch > importBatchMax {
		return usagef("import", "-batch must be 1..%d, got %d", importBatchMax, *batch)
	}
	if *list < 0 {
		return usagef("import", "-max-errors must not be negative, got %d", *list)
	}
	cfg, err := a.loadConfig(f)
	if err != nil {
		return err
	}
	e, err := a.toolEngine(cfg)
	if err != nil {
		return err
	}
	defer stopTool(e)
	imp := &importer{
		a: a, inserter: e, path: path, format: ff,
		batch: *batch, partial: *partial, list: *list,
	}
	return imp.run(ctx, *dryRun)
}

// inserter adds tasks; *taskd.Engine implements it.
type inserter interface {
	InsertTasks(ctx context.Context, ts []tasks.NewTask) ([]tasks.Inserted, error)
}

// importer runs one import.
type importer struct {
	a        *app
	inserter inserter
	path     string
	format   importfile.Format
	batch    int
	partial  bool
	list     int
}

// rejection is a record that cannot be imported.
type rejection struct {
	line   int
	reason string
}

func (im *importer) run(ctx context.Context, dryRun bool) error {
	valid, rejected, shown, err := im.check(ctx)
	if err != nil {
		return err
	}
	im.report(valid, rejected, shown)
	switch {
	case valid+rejected == 0:
		return fmt.Errorf("%s holds no records", im.path)
	case valid == 0 && rejected > 0:
		return fmt.Errorf("nothing imported: every record of %s was rejected", im.path)
	case rejected > 0 && !im.partial:
		return fmt.Errorf("nothing imported: %d of %d records rejected (fix them, or pass -partial to import the %s)",
			rejected, valid+rejected, plural(valid, "valid record"))
	case dryRun:
		fmt.Fprintf(im.a.stdout, "%s: %s would be imported (dry run)\n", im.path, plural(valid, "task"))
		return nil
	}
	return im.insert(ctx, valid)
}

// open opens the file and returns a reader of its records.
func (im *importer) open() (importfile.Reader, io.Closer, error) {
	file, err := os.Open(im.path)
	if err != nil {
		return nil, nil, err
	}
	r, err := importfile.NewReader(file, im.format)
	if err != nil {
		_ = file.Close()
		return nil, nil, fmt.Errorf("%s: %w", im.path, err)
	}
	return r, file, nil
}

// next returns the next record, checked with the store's validation.
func (im *importer) next(r importfile.Reader) (importfile.Record, error) {
	rec, err := r.Next()
	if err != nil {
		if !errors.Is(err, io.EOF) {
			err = fmt.Errorf("read %s: %w", im.path, err)
		}
		return rec, err
	}
	if rec.Err == nil {
		rec.Err = validateTask(rec.Task)
	}
	return rec, nil
}

// check reads the whole file once and counts valid and rejected records,
// keeping the first rejections to list.
func (im *importer) check(ctx context.Context) (valid, rejected int, shown []rejection, err error) {
	r, closer, err := im.open()
	if err != nil {
		return 0, 0, nil, err
	}
	defer closer.Close()
	bar := progress.New(im.a.stderr, "checking", "records", 0)
	defer bar.Finish()
	for {
		if err := ctx.Err(); err != nil {
			return 0, 0, nil, err
		}
		rec, err := im.next(r)
		if errors.Is(err, io.EOF) {
			return valid, rejected, shown, nil
		}
		if err != nil {
			return 0, 0, nil, err
		}
		bar.Add(1)
		if rec.Err != nil {
			rejected++
			if len(shown) < im.list {
				shown = append(shown, rejection{rec.Line, rec.Err.Error()})
			}
			continue
		}
		valid++
	}
}

// report lists the rejected records on stderr.
func (im *importer) report(valid, rejected int, shown []rejection) {
	if rejected == 0 {
		return
	}
	w := im.a.stderr
	fmt.Fprintf(w, "%s: %d of %d records rejected:\n", im.path, rejected, valid+rejected)
	for _, r := range shown {
		fmt.Fprintf(w, "  line %d: %s\n", r.line, r.reason)
	}
	if more := rejected - len(shown); more > 0 {
		fmt.Fprintf(w, "  ... and %d more (raise -max-errors to list them)\n", more)
	}
}

// insert reads the file again and inserts its valid records in batches.
func (im *importer) insert(ctx context.Context, valid int) error {
	r, closer, err := im.open()
	if err != nil {
		return err
	}
	defer closer.Close()
	bar := progress.New(im.a.stderr, "importing", "tasks", int64(valid))
	defer bar.Finish()

	var (
		batch     []tasks.NewTask
		firstLine int // line of batch[0]
		imported  int // records committed, new or with a key that existed
		created   int // records that made tasks
		slots     int // tasks made, the slots of their groups counted
		lastLine  int // last line of the batches committed
		firstID   int64
		lastID    int64
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		ins, err := im.inserter.InsertTasks(ctx, batch)
		if err != nil {
			done := "nothing was imported"
			if imported > 0 {
				done = fmt.Sprintf("the %d records before it, through line %d, were imported", imported, lastLine)
			}
			return fmt.Errorf("insert the batch starting at line %d: %w (%s)", firstLine, err, done)
		}
		for _, in := range ins {
			if !in.Created {
				continue
			}
			if created == 0 {
				firstID = in.ID
			}
			// A group's other slots come after the batch's tasks.
			lastID = max(lastID, in.ID)
			if n := len(in.Slots); n > 0 {
				lastID = max(lastID, in.Slots[n-1])
				slots += n
			} else {
				slots++
			}
			created++
		}
		imported += len(batch)
		bar.Add(len(batch))
		batch = batch[:0]
		return nil
	}
	for {
		rec, err := im.next(r)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if rec.Err != nil {
			if !im.partial {
				return fmt.Errorf("%s changed while importing: line %d is now rejected: %v", im.path, rec.Line, rec.Err)
			}
			continue
		}
		if len(batch) == 0 {
			firstLine = rec.Line
		}
		batch = append(batch, rec.Task)
		lastLine = rec.Line
		if len(batch) == im.batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	existed := imported - created
	ids := fmt.Sprintf("ids %d..%d", firstID, lastID)
	if slots > created {
		ids += fmt.Sprintf(", %s with their groups' slots", plural(slots, "task"))
	}
	switch {
	case created == 0:
		fmt.Fprintf(im.a.stdout, "imported nothing from %s: the keys of all %s exist already\n", im.path, plural(existed, "record"))
	case existed == 0:
		fmt.Fprintf(im.a.stdout, "imported %s from %s (%s)\n", plural(created, "task"), im.path, ids)
	default:
		fmt.Fprintf(im.a.stdout, "imported %s from %s (%s); %s not imported again\n",
			plural(created, "task"), im.path, ids, plural(existed, "record")+" whose key is held")
	}
	return nil
}

// validateTask checks t as Engine.InsertTasks does, and returns the
// reason without the sentinel's prefix, or nil when t is acceptable.
func validateTask(t tasks.NewTask) error {
	err := t.Validate()
	if err == nil {
		return nil
	}
	return errors.New(strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": "))
}

// plural formats a count of things: "1 task", "2 tasks".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
