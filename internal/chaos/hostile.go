package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// hostileCase is one request a client must not be able to hurt taskd with.
type hostileCase struct {
	name   string
	method string
	path   string
	token  string
	body   []byte
	// held: the answer must be 200 with the editor's held claim; otherwise 4xx.
	held bool
}

// hostileResult sums up the burst for the report.
type hostileResult struct {
	Requests  int      `json:"requests"`
	Refused4x int      `json:"refused_4xx"`
	Held      int      `json:"held_claim_200"`
	Failed    []string `json:"failed,omitempty"`
	Unchanged bool     `json:"unchanged"`
}

// nested returns depth levels of open, a 1, and depth levels of close.
func nested(depth int, open, close string) string {
	return strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth)
}

func nestedObj(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

// hostileCases are the requests of the burst: e is an editor holding
// task/fence, other is another editor's name.
func hostileCases(e *editor, task, fence int64, other string) []hostileCase {
	const invalidUTF8 = "\xff\xfe\xc3\x28"
	long := func(n int) string { return strings.Repeat("x", n) }
	t := strconv.FormatInt(task, 10)
	f := strconv.FormatInt(fence, 10)
	sub := "/v1/assignments/" + t + "/submit"
	hb := "/v1/assignments/" + t + "/heartbeat"
	rel := "/v1/assignments/" + t + "/release"
	ed, ad := e.token, adminToken
	submit := func(result string) []byte { return []byte(`{"fence":` + f + `,"result":` + result + `}`) }
	task1 := func(fields string) []byte { return []byte(`[{` + fields + `}]`) }
	var many bytes.Buffer
	many.WriteString("[")
	for i := range 10_001 {
		if i > 0 {
			many.WriteString(",")
		}
		many.WriteString(`{"category":"hostile","title":"t"}`)
	}
	many.WriteString("]")
	huge := []byte(`{"fence":` + f + `,"result":{"s":"` + long(1<<20) + `"}}`)

	return []hostileCase{
		// next
		{"next: garbage JSON", "POST", "/v1/assignments/next", ed, []byte(`{"wait_ms":`), false},
		{"next: not JSON", "POST", "/v1/assignments/next", ed, []byte("\x00\x01garbage"), false},
		{"next: unknown field", "POST", "/v1/assignments/next", ed, []byte(`{"wait":1}`), false},
		{"next: negative wait_ms", "POST", "/v1/assignments/next", ed, []byte(`{"wait_ms":-1}`), false},
		{"next: wait_ms beyond int64", "POST", "/v1/assignments/next", ed, []byte(`{"wait_ms":99999999999999999999999}`), false},
		{"next: wait_ms 1e30", "POST", "/v1/assignments/next", ed, []byte(`{"wait_ms":1e30}`), false},
		{"next: wait_ms a string", "POST", "/v1/assignments/next", ed, []byte(`{"wait_ms":"10"}`), false},
		{"next: wait_ms fractional", "POST", "/v1/assignments/next", ed, []byte(`{"wait_ms":1.5}`), false},
		{"next: trailing data", "POST", "/v1/assignments/next", ed, []byte(`{} {}`), false},
		{"next: huge wait_ms by the holder", "POST", "/v1/assignments/next", ed, []byte(`{"wait_ms":9223372036854775807}`), true},
		// submit of the held claim with bad results
		{"submit: result nested 33 arrays", "POST", sub, ed, submit(nested(33, "[", "]")), false},
		{"submit: result nested 33 objects", "POST", sub, ed, submit(nestedObj(33)), false},
		{"submit: result nested 64 arrays", "POST", sub, ed, submit(nested(64, "[", "]")), false},
		{"submit: result nested 20000 arrays", "POST", sub, ed, submit(nested(20000, "[", "]")), false},
		{"submit: result with invalid UTF-8", "POST", sub, ed, submit(`{"s":"` + invalidUTF8 + `"}`), false},
		{"submit: result key with invalid UTF-8", "POST", sub, ed, submit(`{"` + invalidUTF8 + `":1}`), false},
		{"submit: result null", "POST", sub, ed, submit("null"), false},
		{"submit: no result", "POST", sub, ed, []byte(`{"fence":` + f + `}`), false},
		{"submit: unknown field", "POST", sub, ed, []byte(`{"fence":` + f + `,"result":{},"x":1}`), false},
		{"submit: trailing garbage", "POST", sub, ed, append(submit("{}"), " x"...), false},
		{"submit: body over 1 MiB", "POST", sub, ed, huge, false},
		{"submit: wrong fence", "POST", sub, ed, []byte(`{"fence":` + strconv.FormatInt(fence+1, 10) + `,"result":{}}`), false},
		{"submit: fence 0", "POST", sub, ed, []byte(`{"fence":0,"result":{}}`), false},
		{"submit: negative fence", "POST", sub, ed, []byte(`{"fence":-1,"result":{}}`), false},
		{"submit: fence beyond int64", "POST", sub, ed, []byte(`{"fence":99999999999999999999,"result":{}}`), false},
		{"submit: fence a string", "POST", sub, ed, []byte(`{"fence":"` + f + `","result":{}}`), false},
		{"submit: negative task id", "POST", "/v1/assignments/-1/submit", ed, submit("{}"), false},
		{"submit: task id 0", "POST", "/v1/assignments/0/submit", ed, submit("{}"), false},
		{"submit: task id beyond int64", "POST", "/v1/assignments/99999999999999999999/submit", ed, submit("{}"), false},
		{"submit: task id not a number", "POST", "/v1/assignments/abc/submit", ed, submit("{}"), false},
		{"submit: no such task", "POST", "/v1/assignments/9223372036854775807/submit", ed, submit("{}"), false},
		{"submit: admin token", "POST", sub, ad, submit("{}"), false},
		{"heartbeat: wrong fence", "POST", hb, ed, []byte(`{"fence":` + strconv.FormatInt(fence+5, 10) + `}`), false},
		{"heartbeat: garbage", "POST", hb, ed, []byte(`[[[`), false},
		// tokens
		{"next: no token", "POST", "/v1/assignments/next", "", []byte(`{}`), false},
		{"next: wrong token", "POST", "/v1/assignments/next", "not-a-token-" + long(32), []byte(`{}`), false},
		{"next: 64 KiB token", "POST", "/v1/assignments/next", long(64 << 10), []byte(`{}`), false},
		{"next: admin token", "POST", "/v1/assignments/next", ad, []byte(`{}`), false},
		{"tasks: editor token", "POST", "/v1/tasks", ed, task1(`"category":"hostile","title":"t"`), false},
		{"tasks: wrong token", "POST", "/v1/tasks", "wrong-admin-token-0123456789", task1(`"category":"hostile","title":"t"`), false},
		// tasks
		{"tasks: payload nested 33 arrays", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","payload":{"a":` + nested(33, "[", "]") + `}`), false},
		{"tasks: payload nested 33 objects", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","payload":` + nestedObj(33)), false},
		{"tasks: payload nested 20000", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","payload":{"a":` + nested(20000, "[", "]") + `}`), false},
		{"tasks: payload with invalid UTF-8", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","payload":{"s":"` + invalidUTF8 + `"}`), false},
		{"tasks: title with invalid UTF-8", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"` + invalidUTF8 + `"`), false},
		{"tasks: category with invalid UTF-8", "POST", "/v1/tasks", ad, task1(`"category":"` + invalidUTF8 + `","title":"t"`), false},
		{"tasks: title of 513 characters", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"` + long(513) + `"`), false},
		{"tasks: category of 65 characters", "POST", "/v1/tasks", ad, task1(`"category":"` + long(65) + `","title":"t"`), false},
		{"tasks: empty category", "POST", "/v1/tasks", ad, task1(`"category":"","title":"t"`), false},
		{"tasks: priority beyond INT", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","priority":10000000000`), false},
		{"tasks: priority below INT", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","priority":-10000000000`), false},
		{"tasks: priority beyond int64", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","priority":9223372036854775808`), false},
		{"tasks: max_attempts beyond INT", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","max_attempts":10000000000`), false},
		{"tasks: negative max_attempts", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","max_attempts":-3`), false},
		{"tasks: unknown field", "POST", "/v1/tasks", ad, task1(`"category":"hostile","title":"t","owner":"x"`), false},
		{"tasks: empty list", "POST", "/v1/tasks", ad, []byte(`[]`), false},
		{"tasks: 10,001 tasks", "POST", "/v1/tasks", ad, many.Bytes(), false},
		{"tasks: not a list", "POST", "/v1/tasks", ad, []byte(`{"category":"hostile","title":"t"}`), false},
		{"tasks: garbage", "POST", "/v1/tasks", ad, []byte(`[{"category":"hostile",`), false},
		// editors
		{"editors: name of 129 characters", "POST", "/v1/editors", ad, []byte(`{"name":"` + long(129) + `","categories":["hostile"]}`), false},
		{"editors: name with invalid UTF-8", "POST", "/v1/editors", ad, []byte(`{"name":"h` + invalidUTF8 + `","categories":["hostile"]}`), false},
		{"editors: empty name", "POST", "/v1/editors", ad, []byte(`{"name":"","categories":["hostile"]}`), false},
		{"editors: category of 65 characters", "POST", "/v1/editors", ad, []byte(`{"name":"hostile-x1","categories":["` + long(65) + `"]}`), false},
		{"editors: category with invalid UTF-8", "POST", "/v1/editors", ad, []byte(`{"name":"hostile-x2","categories":["` + invalidUTF8 + `"]}`), false},
		{"editors: taken name", "POST", "/v1/editors", ad, []byte(`{"name":"` + other + `","categories":["hostile"]}`), false},
		{"editors: categories not a list", "POST", "/v1/editors", ad, []byte(`{"name":"hostile-x3","categories":"hostile"}`), false},
		{"editors: editor token", "POST", "/v1/editors", ed, []byte(`{"name":"hostile-x4","categories":["hostile"]}`), false},
		// ids and routes
		{"task: negative id", "GET", "/v1/tasks/-1", ad, nil, false},
		{"task: id 0", "GET", "/v1/tasks/0", ad, nil, false},
		{"task: id beyond int64", "GET", "/v1/tasks/99999999999999999999", ad, nil, false},
		{"task: no such task", "GET", "/v1/tasks/9223372036854775807", ad, nil, false},
		{"force release: negative id", "POST", "/v1/admin/tasks/-7/release", ad, nil, false},
		{"force release: no such task", "POST", "/v1/admin/tasks/9223372036854775807/release", ad, nil, false},
		{"force release: editor token", "POST", "/v1/admin/tasks/" + t + "/release", ed, nil, false},
		{"results: a cursor never given", "GET", "/v1/tasks/" + t + "/results?before=AAAA", ad, nil, false},
		{"results: limit 0", "GET", "/v1/tasks/" + t + "/results?limit=0", ad, nil, false},
		{"earlier: a fence never held", "GET", "/v1/assignments/" + t + "/earlier?fence=" + f + "1", ed, nil, false},
		{"earlier: no fence", "GET", "/v1/assignments/" + t + "/earlier", ed, nil, false},
		{"earlier: admin token", "GET", "/v1/assignments/" + t + "/earlier?fence=" + f, ad, nil, false},
		{"next: wrong method", "GET", "/v1/assignments/next", ed, nil, false},
		{"unknown route", "POST", "/v1/assignments/next/now", ed, []byte(`{}`), false},
		// last: an accepted release would end the held claim
		{"release: reason too long", "POST", rel, ed, []byte(`{"fence":` + f + `,"reason":"` + long(1025) + `"}`), false},
		{"release: reason invalid UTF-8", "POST", rel, ed, []byte(`{"fence":` + f + `,"reason":"` + invalidUTF8 + `"}`), false},
		{"release: skip not a boolean", "POST", rel, ed, []byte(`{"fence":` + f + `,"skip":"yes"}`), false},
	}
}

// hostileBurst runs hostileCases against a replica of its own with a long
// lease (so that the held claim lives through the burst), and checks that
// every answer is 4xx and that no table changed.
func (h *harness) hostileBurst(ctx context.Context) error {
	r, err := newReplica("replica-hostile", h.bin, h.workDir, append(append([]string(nil), h.env...), "TASKD_DISPATCH_LEASE_TTL=5m"))
	if err != nil {
		return err
	}
	h.replicas = append(h.replicas, r) // killed at teardown
	if err := r.Start(ctx); err != nil {
		return err
	}
	defer r.Kill()
	p := h.rec.phase()
	// Tasks from here on are the burst's: the drain check leaves them out.
	if err := h.sql.QueryRowContext(ctx, "SELECT GREATEST((SELECT COALESCE(MAX(id), 0) FROM tasks), (SELECT COALESCE(MAX(id), 0) FROM chaos_purged_tasks))").Scan(&h.drainedMaxID); err != nil {
		return err
	}
	e, err := h.createEditor(ctx, fmt.Sprintf("hostile-%d", h.serial.Add(1)), "hostile")
	if err != nil {
		return err
	}
	h.extra = append(h.extra, e)
	if err := h.addTasksIn(ctx, 1, "hostile"); err != nil {
		return err
	}
	var held assignment
	if err := h.directNext(ctx, e, r, &held); err != nil {
		return fmt.Errorf("hostile editor's claim: %w", err)
	}
	before, err := h.snapshot(ctx)
	if err != nil {
		return err
	}
	skipsBefore, err := h.skipRows(ctx)
	if err != nil {
		return err
	}

	cases := hostileCases(e, held.Task.ID, held.Fence, h.editors[0].name)
	res := &h.hostile
	client := newHTTPClient()
	for _, c := range cases {
		resp := call(ctx, client, r.Base(), c.method, c.path, c.token, c.body, h.cfg.RequestBound)
		h.rec.observe("hostile "+c.name, resp)
		res.Requests++
		switch {
		case c.held:
			var got assignment
			if resp.status == http.StatusOK && json.Unmarshal(resp.body, &got) == nil &&
				got.Task.ID == held.Task.ID && got.Fence == held.Fence {
				res.Held++
				continue
			}
		case resp.status >= 400 && resp.status < 500:
			res.Refused4x++
			continue
		}
		msg := fmt.Sprintf("%s: %d %s", c.name, resp.status, trimBody(resp.body))
		if resp.err != nil {
			msg = fmt.Sprintf("%s: %v", c.name, resp.err)
		}
		res.Failed = append(res.Failed, msg)
		if resp.status >= 500 || resp.timedOut {
			continue // observe recorded it
		}
		want := "4xx"
		if c.held {
			want = "200 with the held claim"
		}
		h.rec.violate(p, "hostile requests refused", "%s, want %s", msg, want)
	}

	after, err := h.snapshot(ctx)
	if err != nil {
		return err
	}
	skipsAfter, err := h.skipRows(ctx)
	if err != nil {
		return err
	}
	res.Unchanged = true
	for table, b := range before {
		if a := after[table]; a != b {
			res.Unchanged = false
			h.rec.violate(p, "hostile requests change nothing", "table %s changed: %s before, %s after", table, b, a)
		}
	}
	for row := range skipsAfter {
		if !skipsBefore[row] {
			res.Unchanged = false
			h.rec.violate(p, "hostile requests change nothing", "task_skips has a row it did not have before: %s", row)
		}
	}
	// The held claim is still there and can be submitted.
	if next := h.submit(ctx, e, &held); next != nil {
		h.rec.violate(p, "hostile requests change nothing", "the hostile editor got a second task %d", next.Task.ID)
	}
	if n := len(e.log.acked); n != 1 {
		h.rec.violate(p, "hostile requests change nothing", "the held claim (task %d fence %d) could not be submitted after the burst", held.Task.ID, held.Fence)
	}
	return nil
}

// snapshot returns each table's row count and checksum. task_skips is left
// out: the sweeper deletes the skips that have passed at any time (see
// skipRows).
func (h *harness) snapshot(ctx context.Context) (map[string]string, error) {
	out := make(map[string]string)
	for _, t := range []string{"tasks", "editors", "editor_categories", "task_events", "task_results"} {
		var n int64
		if err := h.sql.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t).Scan(&n); err != nil {
			return nil, fmt.Errorf("count %s: %w", t, err)
		}
		var name string
		var sum *int64
		if err := h.sql.QueryRowContext(ctx, "CHECKSUM TABLE "+t).Scan(&name, &sum); err != nil {
			return nil, fmt.Errorf("checksum %s: %w", t, err)
		}
		s := "nil"
		if sum != nil {
			s = strconv.FormatInt(*sum, 10)
		}
		out[t] = fmt.Sprintf("%d rows, checksum %s", n, s)
	}
	return out, nil
}

// skipRows returns the rows of task_skips. Between two calls rows may go (the
// sweeper purges skips that have passed), but a row that is new, or whose
// until moved, was written by a request.
func (h *harness) skipRows(ctx context.Context) (map[string]bool, error) {
	rows, err := h.sql.QueryContext(ctx, "SELECT task_id, editor_id, CAST(`until` AS CHAR) FROM task_skips")
	if err != nil {
		return nil, fmt.Errorf("read task_skips: %w", err)
	}
	defer rows.Close()
	out := make(map[string]bool)
	for rows.Next() {
		var task, editor int64
		var until string
		if err := rows.Scan(&task, &editor, &until); err != nil {
			return nil, fmt.Errorf("read task_skips: %w", err)
		}
		out[fmt.Sprintf("task %d editor %d until %s", task, editor, until)] = true
	}
	return out, rows.Err()
}
