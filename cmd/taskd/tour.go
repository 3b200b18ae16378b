package main

import (
	"io"
	"text/template"
)

// tourTemplate is the tour of the API that `taskd dev` prints after its demo
// editors, and README.md's "A tour" shows: a test holds the README's block to
// it, rendered with the README's values (tourValues).
var tourTemplate = template.Must(template.New("tour").Parse(`export TASKD={{.Base}}
export EDITOR_TOKEN={{.EditorToken}}  # {{.EditorNote}}
export ADMIN_TOKEN={{.AdminToken}}  # {{.AdminNote}}

# the editor asks for work; waits up to 30s when nothing is there (204 if still nothing)
A=$(curl -sS -X POST "$TASKD/v1/assignments/next" -H "Authorization: Bearer $EDITOR_TOKEN" -d '{"wait_ms": 30000}'); echo "$A"
# {"task":{"id":42,"category":"politics","priority":3,"title":"…","payload":{…}},
#  "fence":1,"assigned_at":"2026-11-21T10:00:00.000Z","lease_expires_at":"2026-11-21T10:00:30.000Z"}
ID=$(echo "$A" | jq .task.id); FENCE=$(echo "$A" | jq .fence)

# keep it while working on it (an editor's page does this while the editor is active)
curl -sS -X POST "$TASKD/v1/assignments/$ID/heartbeat" -H "Authorization: Bearer $EDITOR_TOKEN" -d "{\"fence\": $FENCE}"

# hand it in: the answer carries the next assignment, or null
A=$(curl -sS -X POST "$TASKD/v1/assignments/$ID/submit" -H "Authorization: Bearer $EDITOR_TOKEN" \
  -d "{\"fence\": $FENCE, \"result\": {\"approved\": true}}"); echo "$A"
ID=$(echo "$A" | jq .next.task.id); FENCE=$(echo "$A" | jq .next.fence)

# or give that one back (skip: not offered to this editor again for a while): 204
curl -sS -X POST "$TASKD/v1/assignments/$ID/release" -H "Authorization: Bearer $EDITOR_TOKEN" \
  -d "{\"fence\": $FENCE, \"reason\": \"not my beat\", \"skip\": true}" -w "%{http_code}\n"

# operators: editors, tasks, the pool
curl -sS -X POST "$TASKD/v1/editors" -H "Authorization: Bearer $ADMIN_TOKEN" -d '{"name":"kim","categories":["sports"]}'
curl -sS -X POST "$TASKD/v1/tasks" -H "Authorization: Bearer $ADMIN_TOKEN" \
  -d '[{"category":"sports","priority":5,"title":"Match report","payload":{"text":"…"}}]'
curl -sS "$TASKD/v1/stats" -H "Authorization: Bearer $ADMIN_TOKEN"
bin/taskd status  # the pool from the command line, in the repository (it reads ./config.yaml)
`))

// tourValues fill in the tour: where taskd listens, an editor's token and the
// admin token, each with a note.
type tourValues struct {
	Base                    string // http://host:port
	EditorToken, EditorNote string
	AdminToken, AdminNote   string
}

// writeTour writes the tour with v's values.
func writeTour(w io.Writer, v tourValues) error {
	return tourTemplate.Execute(w, v)
}
