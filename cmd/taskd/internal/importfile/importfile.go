// Package importfile reads tasks to import from JSON lines or CSV, one record at
// a time, each with its line number and, for a line that cannot become a task,
// the reason.
//
// JSON lines: one object per line, with the fields of POST /v1/tasks:
//
//	{"category": "news", "title": "…", "priority": 5, "payload": {"text": "…"}, "max_attempts": 3,
//	 "key": "article-81", "key_hold": "live", "run_after": "2026-01-02T08:00:00Z", "due_at": "2026-01-02T17:00:00Z",
//	 "stages": ["edit", "review"], "overlap": 2, "gold": {"decision": "reject"}}
//
// category and title are required; unknown fields are refused; a null payload
// is the default, {}; blank lines are skipped. key is a unique external id (a
// task whose key is held is not imported again) and key_hold how long the task
// holds it ("forever", the default, "live" or a duration such as "24h": see
// tasks.KeyHold); run_after and due_at are RFC
// 3339 times. stages are the task's own stages in order ([] for one stage,
// whatever its category says) and overlap how many independent results it
// asks for, 1..tasks.MaxOverlap; absent or null, the category's. gold, when
// given, is the task's known answer ({"decision": …} and/or {"result": {…}}):
// it becomes a gold task (see tasks.NewTask.Gold), and its category needs a
// gold rule the answer fits.
//
// CSV: a header row naming the columns, in any order: category and title
// (required), priority, payload (a JSON object), max_attempts, key, key_hold, run_after,
// due_at, stages, overlap and gold (a JSON object, as in a JSON line). Empty cells take the defaults (priority 0,
// payload {}, max_attempts from the store, no key, forever, no run_after, no due_at,
// the category's stages and overlap). A stages cell lists the stages
// separated by commas (edit,review), or is a JSON array (["edit","review"],
// and [] for one stage).
// Quoted cells may span lines; a record's line is where it starts.
//
// The reader checks the form of each record, and that the strings of a JSON line
// are valid UTF-8 without escaped lone surrogates (which decoding would replace
// with U+FFFD); whether the task is acceptable (lengths, a JSON object payload,
// limits) is for the store's validation.
package importfile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/taskd/taskd/internal/wire"
	"github.com/taskd/taskd/tasks"
)

// Format is a file format.
type Format string

// Formats.
const (
	JSONLines Format = "jsonl"
	CSV       Format = "csv"
)

// MaxLineBytes bounds one JSON line (and one CSV record).
const MaxLineBytes = 4 << 20

// DetectFormat returns the format named by name ("jsonl", "ndjson", "json" or
// "csv", case-insensitive), or, when name is empty, the one the file's
// extension says: .jsonl, .ndjson, .json or .csv.
func DetectFormat(name, path string) (Format, error) {
	if name == "" {
		ext := strings.ToLower(filepath.Ext(path))
		if ext == "" {
			return "", fmt.Errorf("cannot tell the format of %q without an extension: pass -format jsonl or -format csv", path)
		}
		name = ext[1:]
	}
	switch strings.ToLower(name) {
	case "jsonl", "ndjson", "json":
		return JSONLines, nil
	case "csv":
		return CSV, nil
	}
	return "", fmt.Errorf("unknown format %q: want jsonl or csv", name)
}

// Record is one record of the file.
type Record struct {
	// Line is the 1-based line the record starts on.
	Line int
	// Task is the task the record describes, when Err is nil.
	Task tasks.NewTask
	// Err says why the record cannot become a task.
	Err error
}

// Reader reads records.
type Reader interface {
	// Next returns the next record, or io.EOF after the last one. Any other
	// error means the file cannot be read further; problems of one record are
	// in Record.Err instead.
	Next() (Record, error)
}

// NewReader returns a Reader of r in format f. For CSV it reads the header
// first and fails when it is missing or malformed.
func NewReader(r io.Reader, f Format) (Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	skipBOM(br)
	switch f {
	case JSONLines:
		return &jsonReader{r: br}, nil
	case CSV:
		return newCSVReader(br)
	}
	return nil, fmt.Errorf("unknown format %q", f)
}

// skipBOM drops a UTF-8 byte order mark, which spreadsheet exports start with.
func skipBOM(r *bufio.Reader) {
	if b, err := r.Peek(3); err == nil && bytes.Equal(b, []byte("\xef\xbb\xbf")) {
		_, _ = r.Discard(3)
	}
}

type jsonReader struct {
	r    *bufio.Reader
	line int
}

func (j *jsonReader) Next() (Record, error) {
	for {
		text, tooLong, err := readLine(j.r)
		if err != nil {
			return Record{}, err
		}
		j.line++
		if tooLong {
			return Record{Line: j.line, Err: fmt.Errorf("line longer than %d bytes", MaxLineBytes)}, nil
		}
		text = bytes.TrimSpace(text)
		if len(text) == 0 {
			continue
		}
		rec := Record{Line: j.line}
		rec.Task, rec.Err = parseJSONTask(text)
		return rec, nil
	}
}

// readLine reads one line without its end; a line over MaxLineBytes is
// consumed and reported as too long. It returns io.EOF only when nothing is
// left.
func readLine(r *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			if errors.Is(err, io.EOF) && (len(line) > 0 || tooLong) {
				return line, tooLong, nil
			}
			return nil, false, err
		}
		if !tooLong {
			if len(line)+len(chunk) > MaxLineBytes {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if !isPrefix {
			return line, tooLong, nil
		}
	}
}

func parseJSONTask(text []byte) (tasks.NewTask, error) {
	if text[0] != '{' {
		return tasks.NewTask{}, errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.DisallowUnknownFields()
	var jt jsonTask
	if err := dec.Decode(&jt); err != nil {
		return tasks.NewTask{}, jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return tasks.NewTask{}, errors.New("unexpected data after the JSON object")
	}
	// encoding/json has replaced invalid UTF-8 and escaped lone surrogates in the
	// strings it decoded with U+FFFD: refuse them instead, as the API does.
	if err := tasks.CheckJSONStrings(text); err != nil {
		return tasks.NewTask{}, errors.New(strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": "))
	}
	// As POST /v1/tasks reads it, but for the times, read as CSV cells are.
	runAfter, dueAt := jt.RunAfter, jt.DueAt
	jt.RunAfter, jt.DueAt = nil, nil
	t, err := jt.Task()
	if errors.Is(err, wire.ErrEmptyKey) {
		return t, errors.New("key: must not be empty (leave it out for none)")
	}
	if errors.Is(err, tasks.ErrInvalid) {
		return t, errors.New(strings.TrimPrefix(err.Error(), tasks.ErrInvalid.Error()+": "))
	}
	if err != nil {
		return t, err
	}
	if t.RunAfter, err = parseTime("run_after", runAfter); err != nil {
		return t, err
	}
	if t.DueAt, err = parseTime("due_at", dueAt); err != nil {
		return t, err
	}
	t.Stages, t.Gold = jt.Stages, jt.Gold
	if jt.Overlap != nil {
		if t.Overlap, err = checkOverlap(*jt.Overlap); err != nil {
			return t, err
		}
	}
	return t, nil
}

// jsonTask is a JSON line: a task of POST /v1/tasks, with its workflow.
type jsonTask struct {
	wire.NewTask
	// Stages, when not null, are the task's own stages; [] is one stage.
	Stages []string `json:"stages"`
	// Overlap, when not null, is how many results the task asks for.
	Overlap *int `json:"overlap"`
	// Gold, when not null, is the task's known answer: {decision?, result?}.
	Gold *tasks.GoldAnswer `json:"gold"`
}

// checkOverlap returns an overlap given in a record: 1..tasks.MaxOverlap (0,
// the category's, is what leaving it out says).
func checkOverlap(n int) (int, error) {
	if n < 1 || n > tasks.MaxOverlap {
		return 0, fmt.Errorf("overlap must be 1..%d, got %d", tasks.MaxOverlap, n)
	}
	return n, nil
}

// parseStages reads a CSV stages cell: names separated by commas, spaces
// around them dropped, or a JSON array of names ([] for one stage). Whether
// the names are stage names is for the store's validation.
func parseStages(cell string) ([]string, error) {
	cell = strings.TrimSpace(cell)
	if strings.HasPrefix(cell, "[") {
		var stages []string
		if err := json.Unmarshal([]byte(cell), &stages); err != nil {
			return nil, fmt.Errorf("stages: want names separated by commas or a JSON array of strings, got %q", cell)
		}
		if stages == nil {
			stages = []string{}
		}
		return stages, nil
	}
	stages := strings.Split(cell, ",")
	for i, s := range stages {
		stages[i] = strings.TrimSpace(s)
		if stages[i] == "" {
			return nil, fmt.Errorf("stages: an empty stage name in %q", cell)
		}
	}
	return stages, nil
}

// parseTime parses an optional RFC 3339 time as wire.ParseTime does, but
// more leniently, as a spreadsheet's cells need: spaces around it are
// dropped, and nil or blank is the zero time.
func parseTime(field string, s *string) (time.Time, error) {
	if s == nil || strings.TrimSpace(*s) == "" {
		return time.Time{}, nil
	}
	v := strings.TrimSpace(*s)
	t, err := wire.ParseTime(field, &v)
	var te *wire.TimeError
	if errors.As(err, &te) {
		te.Value = *s // quoted as given
	}
	return t, err
}

// jsonError rewords encoding/json's errors for a person fixing a file.
func jsonError(err error) error {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		kind := jsonKind(typeErr.Type.Kind().String())
		// The path of a field of the embedded wire.NewTask starts with its
		// type's name, which the file does not show.
		field := strings.TrimPrefix(typeErr.Field, "NewTask.")
		if n, ok := strings.CutPrefix(typeErr.Value, "number "); ok && kind == "an integer" && !strings.ContainsAny(n, ".eE") {
			return fmt.Errorf("%s: %s is out of range", field, n)
		}
		return fmt.Errorf("%s: want %s, got %s", field, kind, typeErr.Value)
	case errors.As(err, &syntaxErr):
		return fmt.Errorf("invalid JSON at byte %d: %s", syntaxErr.Offset, strings.TrimPrefix(syntaxErr.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("invalid JSON: the object is not closed")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

func jsonKind(kind string) string {
	switch kind {
	case "int", "int64":
		return "an integer"
	case "string":
		return "a string"
	case "slice":
		return "an array"
	}
	return kind
}

// csvColumns are the columns a CSV header may name.
var csvColumns = []string{"category", "title", "priority", "payload", "max_attempts", "key", "key_hold", "run_after", "due_at", "stages", "overlap", "gold"}

type csvReader struct {
	r   *csv.Reader
	col map[string]int // column index by name
}

func newCSVReader(r io.Reader) (*csvReader, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("csv: the file is empty; want a header row (category,title,...)")
	}
	if err != nil {
		return nil, fmt.Errorf("csv: header: %w", err)
	}
	col := map[string]int{}
	for i, name := range header {
		name = strings.ToLower(strings.TrimSpace(name))
		if !slices.Contains(csvColumns, name) {
			return nil, fmt.Errorf("csv: header: unknown column %q (want %s)", name, strings.Join(csvColumns, ", "))
		}
		if _, dup := col[name]; dup {
			return nil, fmt.Errorf("csv: header: column %q appears twice", name)
		}
		col[name] = i
	}
	for _, need := range []string{"category", "title"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("csv: header: no %q column", need)
		}
	}
	return &csvReader{r: cr, col: col}, nil
}

func (c *csvReader) Next() (Record, error) {
	fields, err := c.r.Read()
	var perr *csv.ParseError
	if errors.As(err, &perr) {
		msg := perr.Err.Error()
		if errors.Is(perr.Err, csv.ErrFieldCount) {
			msg = fmt.Sprintf("%d fields, the header has %d", len(fields), len(c.col))
		}
		return Record{Line: perr.StartLine, Err: errors.New(msg)}, nil
	}
	if err != nil {
		return Record{}, err
	}
	line, _ := c.r.FieldPos(0)
	rec := Record{Line: line}
	rec.Task, rec.Err = c.task(fields)
	return rec, nil
}

func (c *csvReader) task(fields []string) (tasks.NewTask, error) {
	cell := func(name string) (string, bool) {
		i, ok := c.col[name]
		if !ok {
			return "", false
		}
		return fields[i], true
	}
	t := tasks.NewTask{}
	t.Category, _ = cell("category")
	t.Title, _ = cell("title")
	for _, f := range []struct {
		name string
		dst  *int
	}{{"priority", &t.Priority}, {"max_attempts", &t.MaxAttempts}} {
		s, ok := cell(f.name)
		if !ok || strings.TrimSpace(s) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(s))
		switch {
		case errors.Is(err, strconv.ErrRange):
			return t, fmt.Errorf("%s: %s is out of range", f.name, strings.TrimSpace(s))
		case err != nil:
			return t, fmt.Errorf("%s: want an integer, got %q", f.name, s)
		}
		*f.dst = n
	}
	if s, ok := cell("payload"); ok && strings.TrimSpace(s) != "" {
		t.Payload = json.RawMessage(s)
	}
	if s, ok := cell("key"); ok {
		t.Key = s // an empty cell: no key
	}
	if s, ok := cell("key_hold"); ok {
		t.KeyHold = tasks.KeyHold(strings.TrimSpace(s)) // an empty cell: the default
	}
	for _, f := range []struct {
		name string
		dst  *time.Time
	}{{"run_after", &t.RunAfter}, {"due_at", &t.DueAt}} {
		if s, ok := cell(f.name); ok {
			var err error
			if *f.dst, err = parseTime(f.name, &s); err != nil {
				return t, err
			}
		}
	}
	if s, ok := cell("stages"); ok && strings.TrimSpace(s) != "" {
		var err error
		if t.Stages, err = parseStages(s); err != nil {
			return t, err
		}
	}
	if s, ok := cell("overlap"); ok && strings.TrimSpace(s) != "" {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return t, fmt.Errorf("overlap: want an integer, got %q", s)
		}
		if t.Overlap, err = checkOverlap(n); err != nil {
			return t, err
		}
	}
	if s, ok := cell("gold"); ok && strings.TrimSpace(s) != "" {
		dec := json.NewDecoder(strings.NewReader(s))
		dec.DisallowUnknownFields()
		var g tasks.GoldAnswer
		if err := dec.Decode(&g); err != nil {
			return t, fmt.Errorf("gold: want a JSON object {\"decision\": …} or {\"result\": {…}}, got %q", s)
		}
		t.Gold = &g
	}
	return t, nil
}
