package tasks

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// schemaSQL reads the repository's schema.sql, which package taskd embeds as
// taskd.Schema. This internal test cannot import package taskd: it imports
// this package.
func schemaSQL(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSchemaEnumsMatchConstants(t *testing.T) {
	statuses := Statuses()
	kinds := []EventKind{EventClaimed, EventHeartbeat, EventSubmitted, EventReleased, EventSkipped,
		EventExpired, EventRecycled, EventFailed, EventDead, EventRequeued, EventCancelled, EventSnoozed}
	enum := func(vals []string) string {
		return "ENUM('" + strings.Join(vals, "', '") + "')"
	}
	var sv, kv, wv, dv []string
	for _, e := range WebhookEvents() {
		wv = append(wv, string(e))
	}
	for _, d := range []DeliveryStatus{DeliveryPending, DeliveryDelivered, DeliveryFailed} {
		dv = append(dv, string(d))
	}
	for _, s := range statuses {
		sv = append(sv, string(s))
	}
	for _, k := range kinds {
		kv = append(kv, string(k))
	}
	schema := schemaSQL(t)
	for _, e := range []string{enum(sv), enum(kv), enum(wv), enum(dv)} {
		if !strings.Contains(schema, e) {
			t.Errorf("schema.sql has no %s", e)
		}
	}
}

func TestNewTaskValidate(t *testing.T) {
	ok := NewTask{Category: "news", Title: "t"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid task: %v", err)
	}
	cases := map[string]NewTask{
		"category":     {Category: "", Title: "t"},
		"category ":    {Category: strings.Repeat("c", 65), Title: "t"},
		"category  ":   {Category: "news ", Title: "t"},
		"title":        {Category: "news", Title: ""},
		"title ":       {Category: "news", Title: strings.Repeat("é", 513)},
		"payload":      {Category: "news", Title: "t", Payload: []byte(`[1]`)},
		"payload ":     {Category: "news", Title: "t", Payload: []byte(`{"a":`)},
		"priority":     {Category: "news", Title: "t", Priority: 1 << 40},
		"max_attempts": {Category: "news", Title: "t", MaxAttempts: 101},
	}
	for field, nt := range cases {
		err := nt.Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error = %v, want ErrInvalid", field, err)
			continue
		}
		if name := strings.TrimSpace(field); !strings.Contains(err.Error(), name) {
			t.Errorf("error %q does not name %s", err, name)
		}
	}
}

func TestTokens(t *testing.T) {
	tok1, h1 := NewToken()
	tok2, h2 := NewToken()
	if len(tok1) != 43 || tok1 == tok2 || h1 == h2 {
		t.Fatalf("tokens %q %q are not 256-bit random", tok1, tok2)
	}
	if HashToken(tok1) != h1 {
		t.Error("HashToken does not match the hash NewToken returned")
	}
	if EditorHolder(12) != "editor:12" {
		t.Errorf("EditorHolder(12) = %q", EditorHolder(12))
	}
}
