package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/taskd/taskd/tasks"
)

// nestedJSON returns a JSON object of depth levels of arrays and objects.
func nestedJSON(depth int) string {
	objects := (depth + 1) / 2
	arrays := depth - objects
	return strings.Repeat(`{"k":`, objects) + strings.Repeat("[", arrays) + "1" +
		strings.Repeat("]", arrays) + strings.Repeat("}", objects)
}

// TestHostileValuesAreUnprocessable sends values the database would refuse, or
// that encoding/json would silently change: each is 422 invalid, with a message
// that names the field, and nothing changes.
func TestHostileValuesAreUnprocessable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	b.addN(t, "news", 2)
	a := b.next(t, e.Token)
	path := func(action string) string { return fmt.Sprintf("/v1/assignments/%d/%s", a.Task.ID, action) }
	task := func(fields string) string { return `[{"category":"news","title":"ok"},{` + fields + `}]` }
	submit := func(result string) string { return fmt.Sprintf(`{"fence":%d,"result":%s}`, a.Fence, result) }
	release := func(reason string) string { return fmt.Sprintf(`{"fence":%d,"reason":"%s"}`, a.Fence, reason) }
	manyCats, _ := json.Marshal(func() []string {
		cats := make([]string, tasks.MaxCategories+1)
		for i := range cats {
			cats[i] = fmt.Sprint("c", i)
		}
		return cats
	}())

	before := b.snapshot(t)
	for _, c := range []struct {
		name, path, token, body string
		inMessage               []string
	}{
		{"payload 33 levels", "/v1/tasks", adminToken, task(`"category":"news","title":"t","payload":` + nestedJSON(33)),
			[]string{"task 1", "payload must nest arrays and objects at most 31 levels deep"}},
		{"payload 32 levels", "/v1/tasks", adminToken, task(`"category":"news","title":"t","payload":` + nestedJSON(32)),
			[]string{"task 1", "payload must nest arrays and objects at most 31 levels deep"}},
		{"payload invalid UTF-8", "/v1/tasks", adminToken, task("\"category\":\"news\",\"title\":\"t\",\"payload\":{\"text\":\"caf\xe9\"}"),
			[]string{"[1].payload.text must be valid UTF-8"}},
		{"payload lone surrogate", "/v1/tasks", adminToken, task(`"category":"news","title":"t","payload":{"text":"\ud800"}`),
			[]string{`[1].payload.text must not escape a lone surrogate (\ud800)`}},
		{"title invalid UTF-8", "/v1/tasks", adminToken, task("\"category\":\"news\",\"title\":\"\xff\""),
			[]string{"[1].title must be valid UTF-8"}},
		{"title lone surrogate", "/v1/tasks", adminToken, task(`"category":"news","title":"a\udc00b"`),
			[]string{`[1].title must not escape a lone surrogate (\udc00)`}},
		{"title too long", "/v1/tasks", adminToken, task(`"category":"news","title":"` + strings.Repeat("😀", tasks.MaxTitleLen+1) + `"`),
			[]string{"task 1", "title must be 1..512 characters"}},
		{"category invalid UTF-8", "/v1/tasks", adminToken, task("\"category\":\"n\xc3\",\"title\":\"t\""),
			[]string{"[1].category must be valid UTF-8"}},
		{"category too long", "/v1/tasks", adminToken, task(`"category":"` + strings.Repeat("é", tasks.MaxCategoryLen+1) + `","title":"t"`),
			[]string{"task 1", "category must be 1..64 characters"}},
		{"priority 2^31", "/v1/tasks", adminToken, task(fmt.Sprintf(`"category":"news","title":"t","priority":%d`, math.MaxInt32+1)),
			[]string{"task 1", "priority must fit in 32 bits"}},
		{"priority -2^31-1", "/v1/tasks", adminToken, task(fmt.Sprintf(`"category":"news","title":"t","priority":%d`, math.MinInt32-1)),
			[]string{"task 1", "priority must fit in 32 bits"}},
		{"priority over 64 bits", "/v1/tasks", adminToken, task(`"category":"news","title":"t","priority":99999999999999999999`),
			[]string{`field "priority" is out of range: 99999999999999999999`}},
		{"max_attempts 101", "/v1/tasks", adminToken, task(`"category":"news","title":"t","max_attempts":101`),
			[]string{"task 1", "max_attempts must be 1..100"}},
		{"max_attempts 2^31", "/v1/tasks", adminToken, task(fmt.Sprintf(`"category":"news","title":"t","max_attempts":%d`, math.MaxInt32+1)),
			[]string{"task 1", "max_attempts must be 1..100"}},
		{"max_attempts negative", "/v1/tasks", adminToken, task(`"category":"news","title":"t","max_attempts":-1`),
			[]string{"task 1", "max_attempts must be 1..100"}},
		{"max_attempts under 64 bits", "/v1/tasks", adminToken, task(`"category":"news","title":"t","max_attempts":-99999999999999999999`),
			[]string{`field "max_attempts" is out of range`}},

		{"editor name invalid UTF-8", "/v1/editors", adminToken, "{\"name\":\"bob\xff\",\"categories\":[\"news\"]}",
			[]string{"name must be valid UTF-8"}},
		{"editor name too long", "/v1/editors", adminToken, `{"name":"` + strings.Repeat("é", tasks.MaxEditorNameLen+1) + `","categories":["news"]}`,
			[]string{"name must be 1..128 characters"}},
		{"editor category invalid UTF-8", "/v1/editors", adminToken, "{\"name\":\"bob\",\"categories\":[\"news\",\"\xe2\x82\"]}",
			[]string{"categories[1] must be valid UTF-8"}},
		{"editor category too long", "/v1/editors", adminToken, `{"name":"bob","categories":["` + strings.Repeat("c", tasks.MaxCategoryLen+1) + `"]}`,
			[]string{"category must be 1..64 characters"}},
		{"editor with too many categories", "/v1/editors", adminToken, `{"name":"bob","categories":` + string(manyCats) + `}`,
			[]string{"at most 64 categories"}},

		{"result 33 levels", path("submit"), e.Token, submit(nestedJSON(33)),
			[]string{"result must nest arrays and objects at most 31 levels deep"}},
		{"result 32 levels", path("submit"), e.Token, submit(nestedJSON(32)),
			[]string{"result must nest arrays and objects at most 31 levels deep"}},
		{"result invalid UTF-8", path("submit"), e.Token, submit("{\"verdict\":[\"\xff\"]}"),
			[]string{"result.verdict[0] must be valid UTF-8"}},
		{"result lone surrogate", path("submit"), e.Token, submit(`"\udbff"`),
			[]string{`result must not escape a lone surrogate (\udbff)`}},
		{"result key invalid UTF-8", path("submit"), e.Token, submit("{\"\xff\":1}"),
			[]string{"a key in result must be valid UTF-8"}},
		{"submit fence over 64 bits", path("submit"), e.Token, `{"fence":18446744073709551616,"result":1}`,
			[]string{`field "fence" is out of range`}},
		{"release reason invalid UTF-8", path("release"), e.Token, release("back \xff later"),
			[]string{"reason must be valid UTF-8"}},
		{"release reason lone surrogate", path("release"), e.Token, release(`\ud800`),
			[]string{`reason must not escape a lone surrogate`}},
		{"heartbeat fence under 64 bits", path("heartbeat"), e.Token, `{"fence":-9223372036854775809}`,
			[]string{`field "fence" is out of range`}},
		{"next wait over 64 bits", "/v1/assignments/next", e.Token, `{"wait_ms":9223372036854775808}`,
			[]string{`field "wait_ms" is out of range`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			msg := wantError(t, b.do(t, "POST", c.path, c.token, c.body), http.StatusUnprocessableEntity, "invalid")
			for _, want := range c.inMessage {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q does not say %q", msg, want)
				}
			}
		})
	}
	b.unchanged(t, before)

	// The limits pass: 31 levels in a payload and in a result, the longest texts.
	ids := b.add(t, newTask{Category: strings.Repeat("é", tasks.MaxCategoryLen), Title: strings.Repeat("😀", tasks.MaxTitleLen),
		Payload: json.RawMessage(nestedJSON(tasks.MaxJSONDepth))})
	if got := b.task(t, ids[0]); string(got.Payload) != nestedJSON(tasks.MaxJSONDepth) {
		t.Errorf("stored payload %.80s", got.Payload)
	}
	var next struct {
		Next json.RawMessage `json:"next"`
	}
	wantJSON(t, b.do(t, "POST", path("submit"), e.Token, submit(nestedJSON(tasks.MaxJSONDepth))), http.StatusOK, &next)
	if n := b.snapshot(t).Counts["task_results"]; n != 1 {
		t.Errorf("%d results after the submit, want 1", n)
	}
}

// TestExtremeIDs sends the largest ids a path can hold: each is a plain 404.
func TestExtremeIDs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	const maxID = "9223372036854775807"
	before := b.snapshot(t)
	for _, c := range []struct{ method, path, token, body string }{
		{"GET", "/v1/tasks/" + maxID, adminToken, ""},
		{"POST", "/v1/admin/tasks/" + maxID + "/release", adminToken, ""},
		{"POST", "/v1/assignments/" + maxID + "/heartbeat", e.Token, `{"fence":` + maxID + `}`},
		{"POST", "/v1/assignments/" + maxID + "/submit", e.Token, `{"fence":` + maxID + `,"result":{}}`},
		{"POST", "/v1/assignments/" + maxID + "/release", e.Token, `{"fence":` + maxID + `,"reason":"x"}`},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			wantError(t, b.do(t, c.method, c.path, c.token, c.body), http.StatusNotFound, "not_found")
		})
	}
	b.unchanged(t, before)
}

// TestNumbersJSONDoesNotHave sends NaN, infinities and numbers that are no
// integers where integers belong: malformed requests, 400, and nothing changes.
func TestNumbersJSONDoesNotHave(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e := b.editor(t, "ada", "news")
	id := b.addN(t, "news", 1)[0]
	before := b.snapshot(t)
	for _, c := range []struct{ name, path, token, body string }{
		{"wait_ms NaN", "/v1/assignments/next", e.Token, `{"wait_ms":NaN}`},
		{"wait_ms Infinity", "/v1/assignments/next", e.Token, `{"wait_ms":Infinity}`},
		{"priority -Infinity", "/v1/tasks", adminToken, `[{"category":"news","title":"t","priority":-Infinity}]`},
		{"priority 1e400", "/v1/tasks", adminToken, `[{"category":"news","title":"t","priority":1e400}]`},
		{"max_attempts 1e2", "/v1/tasks", adminToken, `[{"category":"news","title":"t","max_attempts":1e2}]`},
		{"fence 0x10", fmt.Sprintf("/v1/assignments/%d/heartbeat", id), e.Token, `{"fence":0x10}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			wantError(t, b.do(t, "POST", c.path, c.token, c.body), http.StatusBadRequest, "bad_request")
		})
	}
	b.unchanged(t, before)
}
