// Package exportfile writes accepted results as JSON lines or CSV, one record
// per result, and reads back where an export file ends so that an export can
// be resumed into the same file without a duplicate.
//
// A JSON line is the same object as a line of GET /v1/results (wire.Result),
// its result compacted:
//
//	{"cursor":"42","task_id":7,"fence":1,"category":"news","title":"…",
//	 "holder":"editor:3","editor_id":3,"result":{…},"submitted_at":"2026-01-02T15:04:05.000Z"}
//
// A result of a task with stages or a group has, after those, the stage it
// was submitted at, the submitter's decision and notes, and the task's group
// and overlap, each only when set:
//
//	{…,"submitted_at":"…","stage":"review","decision":"send_back","notes":"fix the lede"}
//	{…,"submitted_at":"…","decision":"cat","group_id":41,"overlap":3}
//
// A CSV file has a header row with Columns, then one row per result: the
// result as compact JSON text, editor_id empty for a worker's result. A
// Writer made WithWorkflow writes WorkflowColumns instead, whose last five
// cells are empty when not set.
//
// No CSV cell is a formula to a spreadsheet: a cell that starts with '=', '+',
// '-', '@', a tab or a carriage return is written with a single quote before
// it ("=1+1" as "'=1+1"), unless it is a plain number such as -3 or -1.5e3
// (OWASP's advice on CSV injection). A reader that wants the text back drops
// that quote.
package exportfile

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

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

// Columns are the CSV columns, in order; key is empty for a task without one.
var Columns = []string{"cursor", "task_id", "fence", "category", "title", "key", "holder", "editor_id", "result", "submitted_at"}

// WorkflowColumns are Columns and the workflow's: the stage the result was
// submitted at, the submitter's decision and notes, the task's group and how
// many results the group asks for; each empty when not set.
var WorkflowColumns = append(slices.Clip(Columns), "stage", "decision", "notes", "group_id", "overlap")

// maxRecordBytes bounds one record when reading a file back: a result is at
// most tasks.MaxJSONBytes, a title 512 characters.
const maxRecordBytes = tasks.MaxJSONBytes + 64<<10

// DetectFormat returns the format named by name ("jsonl", "ndjson", "json" or
// "csv", case-insensitive), or, when name is empty, the one path's extension
// says (.jsonl, .ndjson, .json, .csv), and JSON lines when path is empty
// (standard output) or has no extension.
func DetectFormat(name, path string) (Format, error) {
	if name == "" {
		ext := strings.ToLower(filepath.Ext(path))
		if ext == "" {
			return JSONLines, nil
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

// Writer writes records. It buffers them: what Flush has not written may be
// lost, and every record written before a Flush is whole in the output.
type Writer struct {
	f   Format
	buf *bufio.Writer
	enc *json.Encoder
	csv *csv.Writer
	// header is the CSV header, still to be written before the first record.
	header bool
	// workflow: CSV rows have WorkflowColumns.
	workflow bool
}

// NewWriter returns a Writer of format f on w. header asks for the CSV header
// row (a new file); it is written with the first record or Flush.
func NewWriter(w io.Writer, f Format, header bool) *Writer {
	buf := bufio.NewWriterSize(w, 64<<10)
	ew := &Writer{f: f, buf: buf}
	switch f {
	case CSV:
		ew.csv = csv.NewWriter(buf)
		ew.header = header
	default:
		ew.enc = json.NewEncoder(buf)
		ew.enc.SetEscapeHTML(false)
	}
	return ew
}

// WithWorkflow makes w's CSV rows (and header) have WorkflowColumns; it
// changes nothing for JSON lines, which have the workflow's fields when set.
// It returns w.
func (w *Writer) WithWorkflow() *Writer {
	w.workflow = true
	return w
}

// Write writes one result.
func (w *Writer) Write(r *tasks.Result) error {
	var compact bytes.Buffer
	if err := json.Compact(&compact, r.Result); err != nil {
		return fmt.Errorf("result of task %d fence %d: %w", r.TaskID, r.Fence, err)
	}
	line := wire.ResultOf(r)
	line.Result = compact.Bytes()
	if w.f != CSV {
		return w.enc.Encode(line)
	}
	if err := w.writeHeader(); err != nil {
		return err
	}
	row := []string{
		line.Cursor, strconv.FormatInt(r.TaskID, 10), strconv.FormatInt(r.Fence, 10), r.Category, r.Title,
		r.Key, r.Holder, orEmpty(r.EditorID), compact.String(), line.SubmittedAt,
	}
	if w.workflow {
		row = append(row, line.Stage, line.Decision, line.Notes, orEmpty(line.GroupID), orEmpty(int64(line.Overlap)))
	}
	for i := range row {
		row[i] = SafeCell(row[i])
	}
	return w.csv.Write(row)
}

// plainNumber matches a JSON number: a spreadsheet reads it as that number,
// never as a formula, whatever its sign.
var plainNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// SafeCell returns s as a CSV cell that no spreadsheet takes for a formula: s
// with a single quote before it when it starts with '=', '+', '-', '@', a tab
// or a carriage return and is not a plain number; s itself otherwise.
func SafeCell(s string) string {
	if s == "" || !strings.ContainsRune("=+-@\t\r", rune(s[0])) || plainNumber.MatchString(s) {
		return s
	}
	return "'" + s
}

// orEmpty is n in decimal, "" for 0.
func orEmpty(n int64) string {
	if n == 0 {
		return ""
	}
	return strconv.FormatInt(n, 10)
}

func (w *Writer) writeHeader() error {
	if !w.header {
		return nil
	}
	w.header = false
	if w.workflow {
		return w.csv.Write(WorkflowColumns)
	}
	return w.csv.Write(Columns)
}

// Flush writes the buffered records (and a new CSV file's header).
func (w *Writer) Flush() error {
	if w.csv != nil {
		if err := w.writeHeader(); err != nil {
			return err
		}
		w.csv.Flush()
		if err := w.csv.Error(); err != nil {
			return err
		}
	}
	return w.buf.Flush()
}

// File is an open export file for Resume: its bytes are read from the start,
// and single bytes are read at an offset.
type File interface {
	io.Reader
	io.ReaderAt
}

// End is where an export file ends.
type End struct {
	// Cursor is the cursor of the last whole record, 0 when there is none.
	Cursor int64
	// Records counts the whole records.
	Records int64
	// Size is the length of the whole records (and a CSV header): a record cut
	// short after them, by an export that was killed while writing it, is to
	// be cut off before appending.
	Size int64
	// Header says the file has a CSV header row, and Workflow that it is
	// WorkflowColumns (see Writer.WithWorkflow).
	Header   bool
	Workflow bool
}

// ErrNotExport means the file is not an export in the format: a record that
// does not parse, a CSV header that is neither Columns nor WorkflowColumns,
// or cursors that do not grow.
var ErrNotExport = errors.New("not an export file")

// Resume reads an export file of format f to its end and reports it. Only the
// last record may be cut short (it lacks its final newline, or a CSV quote
// is open at the end); it is left out of End.
func Resume(file File, f Format) (End, error) {
	if f == CSV {
		return resumeCSV(file)
	}
	return resumeJSON(file)
}

func resumeJSON(file File) (End, error) {
	var end End
	r := bufio.NewReaderSize(file, 64<<10)
	for n := 1; ; n++ {
		text, err := readLine(r)
		if errors.Is(err, io.EOF) {
			return end, nil // a line without its newline is cut short
		}
		if err != nil {
			return end, fmt.Errorf("line %d: %w", n, err)
		}
		var rec struct {
			Cursor string `json:"cursor"`
		}
		if err := json.Unmarshal(text, &rec); err != nil {
			return end, fmt.Errorf("%w: line %d: %v", ErrNotExport, n, err)
		}
		if err := end.add(rec.Cursor, n, int64(len(text))); err != nil {
			return end, err
		}
	}
}

// readLine reads a line up to and with its newline; io.EOF when there is no
// newline before the end.
func readLine(r *bufio.Reader) ([]byte, error) {
	var text []byte
	for {
		chunk, err := r.ReadSlice('\n')
		text = append(text, chunk...)
		switch {
		case err == nil:
			return text, nil
		case errors.Is(err, bufio.ErrBufferFull):
			if len(text) > maxRecordBytes {
				return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrNotExport, maxRecordBytes)
			}
		default:
			return nil, err
		}
	}
}

// add counts a whole record of size bytes with cursor s, at line n.
func (e *End) add(s string, n int, size int64) error {
	c, err := strconv.ParseInt(s, 10, 64)
	if err != nil || c <= e.Cursor {
		return fmt.Errorf("%w: line %d has cursor %q after %d", ErrNotExport, n, s, e.Cursor)
	}
	e.Cursor = c
	e.Records++
	e.Size += size
	return nil
}

func resumeCSV(file File) (End, error) {
	var end End
	r := csv.NewReader(file)
	r.FieldsPerRecord = 0 // the header's, Columns or WorkflowColumns
	r.ReuseRecord = true
	endsLine := func(offset int64) bool {
		var b [1]byte
		_, err := file.ReadAt(b[:], offset-1)
		return err == nil && b[0] == '\n'
	}
	for {
		rec, err := r.Read()
		if errors.Is(err, io.EOF) {
			return end, nil
		}
		offset := r.InputOffset()
		if err != nil {
			// Cut short if it is the last record; malformed if more follow.
			if _, next := r.Read(); errors.Is(next, io.EOF) {
				return end, nil
			}
			return end, fmt.Errorf("%w: %v", ErrNotExport, err)
		}
		if !endsLine(offset) {
			if _, next := r.Read(); errors.Is(next, io.EOF) {
				return end, nil
			}
			return end, fmt.Errorf("%w: record at byte %d does not end its line", ErrNotExport, offset)
		}
		line, _ := r.FieldPos(0)
		if !end.Header {
			end.Workflow = slices.Equal(rec, WorkflowColumns)
			if !end.Workflow && !slices.Equal(rec, Columns) {
				return end, fmt.Errorf("%w: the header is %q, want %q or %q", ErrNotExport, rec, Columns, WorkflowColumns)
			}
			end.Header, end.Size = true, offset
			continue
		}
		if err := end.add(rec[0], line, offset-end.Size); err != nil {
			return end, err
		}
		end.Size = offset
	}
}
