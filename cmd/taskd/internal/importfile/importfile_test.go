package importfile

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// readAll reads every record of text.
func readAll(t *testing.T, text string, f Format) []Record {
	t.Helper()
	r, err := NewReader(strings.NewReader(text), f)
	if err != nil {
		t.Fatalf("NewReader: %v", err)
	}
	var out []Record
	for {
		rec, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		out = append(out, rec)
	}
}

// outcome is a record as "line: ok category/title/priority/payload/max" or
// "line: error".
func outcome(rec Record) string {
	if rec.Err != nil {
		return strings.Join([]string{itoa(rec.Line), "ERR", rec.Err.Error()}, " ")
	}
	t := rec.Task
	return strings.Join([]string{itoa(rec.Line), "ok", t.Category, t.Title, itoa(t.Priority), string(t.Payload), itoa(t.MaxAttempts)}, " ")
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestJSONLines(t *testing.T) {
	t.Parallel()
	text := "\xef\xbb\xbf" + `{"category":"news","title":"One","priority":-3,"payload":{"text":"a"},"max_attempts":2}

  {"category":"news","title":"Two"}  
{"category":"news","title":"x","extra":1}
[1, 2]
{"category":"news","title":"x","priority":"high"}
{"category":"news","title":"x"} {"again":1}
{"category":"news","title":"x"
{"category":"news","title":"null payload","payload":null}
{"category":"news","title":"no newline at the end"}`
	got := make([]string, 0)
	for _, rec := range readAll(t, text, JSONLines) {
		got = append(got, outcome(rec))
	}
	want := []string{
		`1 ok news One -3 {"text":"a"} 2`,
		`3 ok news Two 0  0`,
		`4 ERR unknown field "extra"`,
		`5 ERR not a JSON object`,
		`6 ERR priority: want an integer, got string`,
		`7 ERR unexpected data after the JSON object`,
		`8 ERR invalid JSON: the object is not closed`,
		`9 ok news null payload 0  0`,
		`10 ok news no newline at the end 0  0`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestJSONLineTooLong(t *testing.T) {
	t.Parallel()
	long := `{"category":"news","title":"` + strings.Repeat("x", MaxLineBytes) + `"}`
	recs := readAll(t, long+"\n"+`{"category":"news","title":"after"}`+"\n", JSONLines)
	if len(recs) != 2 || recs[0].Err == nil || !strings.Contains(recs[0].Err.Error(), "longer than") ||
		recs[1].Err != nil || recs[1].Line != 2 || recs[1].Task.Title != "after" {
		t.Errorf("got %v", recs)
	}
}

func TestCSV(t *testing.T) {
	t.Parallel()
	text := "\xef\xbb\xbf" + ` Title ,CATEGORY,priority,payload,max_attempts
"Quoted, with comma",news,2,"{""text"":""hi""}",3
"multi
line",news,,,
bad priority,news,high,,
short,news
attempts,news,1,,many
"bare "quote",news,1,,
after,news,-1,{},
`
	var got []string
	for _, rec := range readAll(t, text, CSV) {
		got = append(got, outcome(rec))
	}
	want := []string{
		`2 ok news Quoted, with comma 2 {"text":"hi"} 3`,
		"3 ok news multi\nline 0  0",
		`5 ERR priority: want an integer, got "high"`,
		`6 ERR 2 fields, the header has 5`,
		`7 ERR max_attempts: want an integer, got "many"`,
		`8 ERR extraneous or missing " in quoted-field`,
		`9 ok news after -1 {} 0`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestCSVHeader(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"":                        "the file is empty",
		"category,title,colour\n": `unknown column "colour"`,
		"category,title,title\n":  `column "title" appears twice`,
		"category,priority\n":     `no "title" column`,
		"title\nx\n":              `no "category" column`,
		"category,\"title\n":      "header",
	} {
		_, err := NewReader(strings.NewReader(text), CSV)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("header %q: err = %v, want one mentioning %q", text, err, want)
		}
	}
}

func TestDetectFormat(t *testing.T) {
	t.Parallel()
	cases := []struct {
		flag, path string
		want       Format
		err        string
	}{
		{"", "a/tasks.jsonl", JSONLines, ""},
		{"", "tasks.NDJSON", JSONLines, ""},
		{"", "tasks.json", JSONLines, ""},
		{"", "tasks.csv", CSV, ""},
		{"csv", "tasks.txt", CSV, ""},
		{"JSONL", "tasks.csv", JSONLines, ""},
		{"", "tasks", "", "without an extension"},
		{"", "tasks.txt", "", `unknown format "txt"`},
		{"xml", "tasks.csv", "", `unknown format "xml"`},
	}
	for _, c := range cases {
		got, err := DetectFormat(c.flag, c.path)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("DetectFormat(%q, %q) = %v, %v; want error %q", c.flag, c.path, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("DetectFormat(%q, %q) = %v, %v; want %v", c.flag, c.path, got, err, c.want)
		}
	}
}

// TestStringsDecodingWouldChange checks that a JSON line whose strings
// encoding/json would change (invalid UTF-8, an escaped lone surrogate) is
// refused, naming the field, instead of read as something else.
func TestStringsDecodingWouldChange(t *testing.T) {
	t.Parallel()
	text := "{\"category\":\"news\",\"title\":\"caf\xe9\"}\n" +
		`{"category":"n\ud800ws","title":"x"}` + "\n" +
		"{\"category\":\"news\",\"title\":\"x\",\"payload\":{\"a\":[\"\xff\"]}}\n" +
		`{"category":"news","title":"caf\u00e9 \ud83d\ude00"}` + "\n"
	var got []string
	for _, rec := range readAll(t, text, JSONLines) {
		got = append(got, outcome(rec))
	}
	want := []string{
		`1 ERR title must be valid UTF-8`,
		`2 ERR category must not escape a lone surrogate (\ud800)`,
		`3 ERR payload.a[0] must be valid UTF-8`,
		`4 ok news café 😀 0  0`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestIntegersOutOfRange checks that an integer too big for Go's int is said to be
// out of range, in both formats; the store's own limits are checked later.
func TestIntegersOutOfRange(t *testing.T) {
	t.Parallel()
	var got []string
	for _, rec := range readAll(t, `{"category":"news","title":"x","priority":99999999999999999999}
{"category":"news","title":"x","max_attempts":-99999999999999999999}
{"category":"news","title":"x","priority":2147483648}
`, JSONLines) {
		got = append(got, outcome(rec))
	}
	for _, rec := range readAll(t, "category,title,priority,max_attempts\nnews,x,99999999999999999999,\nnews,x,,-99999999999999999999\n", CSV) {
		got = append(got, outcome(rec))
	}
	want := []string{
		`1 ERR priority: 99999999999999999999 is out of range`,
		`2 ERR max_attempts: -99999999999999999999 is out of range`,
		`3 ok news x 2147483648  0`,
		`2 ERR priority: 99999999999999999999 is out of range`,
		`3 ERR max_attempts: -99999999999999999999 is out of range`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// workflowOutcome is a record as "line: ok stages overlap" (stages "nil" when
// the category's, "[]" for one stage) or "line: ERR error".
func workflowOutcome(rec Record) string {
	if rec.Err != nil {
		return itoa(rec.Line) + " ERR " + rec.Err.Error()
	}
	stages := "nil"
	if rec.Task.Stages != nil {
		stages = "[" + strings.Join(rec.Task.Stages, " ") + "]"
	}
	return strings.Join([]string{itoa(rec.Line), "ok", rec.Task.Title, stages, itoa(rec.Task.Overlap)}, " ")
}

// TestWorkflow checks that records carry their stages and overlap in both
// formats: absent or empty for the category's, [] for one stage; and that a
// bad form is reported with the record's line.
func TestWorkflow(t *testing.T) {
	t.Parallel()
	check := func(name string, recs []Record, want []string) {
		t.Helper()
		var got []string
		for _, rec := range recs {
			got = append(got, workflowOutcome(rec))
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s records:\n%s\nwant:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	check("JSON", readAll(t, `{"category":"desk","title":"a","stages":["edit","review"],"overlap":2}
{"category":"desk","title":"b","stages":[]}
{"category":"desk","title":"c"}
{"category":"desk","title":"d","stages":null,"overlap":null}
{"category":"desk","title":"e","overlap":0}
{"category":"desk","title":"f","overlap":10}
{"category":"desk","title":"g","stages":"edit,review"}
{"category":"desk","title":"h","overlap":"2"}
{"category":"desk","title":"i","stages":["edit",1]}
`, JSONLines), []string{
		"1 ok a [edit review] 2",
		"2 ok b [] 0",
		"3 ok c nil 0",
		"4 ok d nil 0",
		"5 ERR overlap must be 1..9, got 0",
		"6 ERR overlap must be 1..9, got 10",
		"7 ERR stages: want an array, got string",
		"8 ERR overlap: want an integer, got string",
		"9 ERR stages: want a string, got number",
	})
	check("CSV", readAll(t, `category,title,stages,overlap
desk,a,"edit, review",2
desk,b,[],
desk,c,,
desk,d,"[""edit"",""review""]", 1
desk,e,"edit,,review",
desk,f,,0
desk,g,,x
desk,h,[edit],
`, CSV), []string{
		"2 ok a [edit review] 2",
		"3 ok b [] 0",
		"4 ok c nil 0",
		"5 ok d [edit review] 1",
		`6 ERR stages: an empty stage name in "edit,,review"`,
		"7 ERR overlap must be 1..9, got 0",
		`8 ERR overlap: want an integer, got "x"`,
		`9 ERR stages: want names separated by commas or a JSON array of strings, got "[edit]"`,
	})
}

// TestKeyHold: key_hold is read from JSON lines and a CSV column, as the API
// reads it; an empty one is refused in JSON and the default in CSV.
func TestKeyHold(t *testing.T) {
	t.Parallel()
	hold := func(rec Record) string {
		if rec.Err != nil {
			return "ERR " + rec.Err.Error()
		}
		return rec.Task.Key + " " + string(rec.Task.KeyHold)
	}
	var got []string
	for _, rec := range readAll(t, `{"category":"news","title":"a","key":"a","key_hold":"live"}
{"category":"news","title":"b","key":"b","key_hold":"24h"}
{"category":"news","title":"c","key":"c","key_hold":""}
{"category":"news","title":"d","key":"d","key_hold":null}
`, JSONLines) {
		got = append(got, hold(rec))
	}
	for _, rec := range readAll(t, "category,title,key,key_hold\nnews,e,e,live\nnews,f,f,\nnews,g,g, 1h \n", CSV) {
		got = append(got, hold(rec))
	}
	want := []string{"a live", "b 24h", "ERR key_hold must not be empty (leave it out for the default)", "d ", "e live", "f ", "g 1h"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
