package webhook_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/taskd/taskd/dispatcher/webhook"
)

// A receiver verifies the signature on the raw body before it parses it, and
// deduplicates by the event's id: taskd delivers at least once.
func ExampleVerify() {
	const secret = "the-webhook-secret-from-config"
	seen := map[int64]bool{} // a real receiver keeps this with the data it stores
	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err := webhook.Verify(secret, r.Header.Get(webhook.SignatureHeader), body, 0, time.Now()); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var ev webhook.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			http.Error(w, "bad JSON", http.StatusBadRequest)
			return
		}
		if !seen[ev.ID] {
			seen[ev.ID] = true
			fmt.Printf("event %d: %s task %d (%s) result %s\n", ev.ID, ev.Type, ev.Data.TaskID, ev.Data.Cause, ev.Data.Result)
		}
		w.WriteHeader(http.StatusNoContent)
	})

	// What taskd sends, twice (a retry), and a forgery.
	body := `{"id":42,"type":"submitted","created_at":"2026-01-02T03:04:05.678Z",` +
		`"data":{"task_id":7,"category":"news","fence":1,"holder":"editor:3","editor_id":3,"cause":"submit","result":{"ok":true}}}`
	send := func(sig string) int {
		r := httptest.NewRequest("POST", "/hooks/taskd", strings.NewReader(body))
		r.Header.Set(webhook.EventIDHeader, "42")
		r.Header.Set(webhook.SignatureHeader, sig)
		w := httptest.NewRecorder()
		receiver.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println(send(webhook.Sign(secret, time.Now(), []byte(body))))
	fmt.Println(send(webhook.Sign(secret, time.Now(), []byte(body))))
	fmt.Println(send(webhook.Sign("another-secret-0123", time.Now(), []byte(body))))
	// Output:
	// event 42: submitted task 7 (submit) result {"ok":true}
	// 204
	// 204
	// 401
}

// A task with stages makes one submitted event per stage: the receiver tells
// a result that ended the task from one that moved it on, and a send back
// from an approval. A task that asks for several results names its group.
func ExampleEvent_workflow() {
	bodies := []string{
		`{"id":50,"type":"submitted","created_at":"2026-01-02T03:04:05.678Z","data":{"task_id":7,"category":"desk","fence":1,` +
			`"holder":"editor:3","editor_id":3,"cause":"submit","stage":"edit","task_status":"pending","next_stage":"review","result":{"text":"…"}}}`,
		`{"id":51,"type":"submitted","created_at":"2026-01-02T03:09:05.678Z","data":{"task_id":7,"category":"desk","fence":2,` +
			`"holder":"editor:4","editor_id":4,"cause":"submit","stage":"review","decision":"send_back","notes":"fix the lede",` +
			`"task_status":"pending","next_stage":"edit","result":{}}}`,
		`{"id":52,"type":"submitted","created_at":"2026-01-02T03:19:05.678Z","data":{"task_id":9,"category":"labels","fence":1,` +
			`"holder":"editor:4","editor_id":4,"cause":"submit","decision":"cat","group_id":8,"overlap":3,"result":{"label":"cat"}}}`,
	}
	for _, body := range bodies {
		var ev webhook.Event
		if err := json.Unmarshal([]byte(body), &ev); err != nil {
			panic(err)
		}
		d := ev.Data
		switch {
		case d.GroupID != 0:
			fmt.Printf("task %d: one of %d results of group %d: %s\n", d.TaskID, d.Overlap, d.GroupID, d.Decision)
		case d.Decision == webhook.DecisionSendBack:
			fmt.Printf("task %d: %s sent back to %s: %s\n", d.TaskID, d.Stage, d.NextStage, d.Notes)
		case d.TaskStatus == webhook.StatusPending:
			fmt.Printf("task %d: %s done, on to %s\n", d.TaskID, d.Stage, d.NextStage)
		default:
			fmt.Printf("task %d: done\n", d.TaskID)
		}
	}
	// Output:
	// task 7: edit done, on to review
	// task 7: review sent back to edit: fix the lede
	// task 9: one of 3 results of group 8: cat
}
