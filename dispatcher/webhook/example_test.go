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
